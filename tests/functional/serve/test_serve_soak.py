"""A one-minute soak of a real `serve` at saturation: mixed valid, invalid and oversized requests.

Twelve clients (2 running and 4 pending slots) send, for `SOAK_SECONDS`, a seeded mix: texts
(float and base64), token ids, 2048-input requests, malformed and invalid bodies, too many
inputs, and bodies over the 6 MiB limit (``Content-Length`` with urllib, chunked with
requests). Every answer is checked: vectors against the engine in this process, errors in
OpenAI's shape with the expected code, 429 only with ``Retry-After``; no 5xx. ``/health``
is polled throughout and must answer every time.

Memory: after a warm-up (`WARMUP_SECONDS`, every kind of request sent), RSS, at its peak
and at the end, may grow by at most `GROWTH_BOUND` = ``in_flight x W + clients x 512 KiB``:
W = 16 MiB covers the costliest request of the mix (2048 inputs: 13.5 MiB of peak growth
served alone in a fresh server, measured), and each connection holds at most one socket
read and uvicorn's buffer of a body it is not reading (oversized ones are dropped as they
come). Figures are printed with ``-rP``.
"""

from __future__ import annotations

import base64
import json
import random
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import pytest
import requests
from siglip_text.engine.service import EmbeddingService

from devkit.openai_shapes import assert_openai_error
from devkit.servers import MIB, running_server

pytestmark = pytest.mark.slow  # a one-minute soak


SOAK_SECONDS = 60.0
WARMUP_SECONDS = 10.0
CLIENTS = 12
IN_FLIGHT, PENDING = 2, 4
GROWTH_BOUND = IN_FLIGHT * 16 * MIB + CLIENTS * 512 * 1024
LIMIT = 6 * MIB
MODEL = "siglip-text/synthetic-demo-tiny"
JSON = {"content-type": "application/json"}


@dataclass
class Tally:
    statuses: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, kind: str, status: int) -> None:
        with self.lock:
            self.statuses[f"{kind} {status}"] += 1

    def fail(self, message: str) -> None:
        with self.lock:
            self.failures.append(message)


def oversized(rng: random.Random) -> bytes:
    return b'{"input": "' + b"a" * (LIMIT + rng.randrange(1, 1024 * 1024)) + b'"}'


def chunks(body: bytes) -> Iterator[bytes]:
    for start in range(0, len(body), 256 * 1024):
        yield body[start : start + 256 * 1024]


def check_vectors(body: dict[str, Any], expected: np.ndarray, picks: list[int]) -> None:
    data = body["data"]
    assert [d["index"] for d in data] == list(range(len(data)))
    assert len(data) == len(expected)
    rows = []
    for p in picks:
        item = data[p]["embedding"]
        if isinstance(item, str):
            rows.append(np.frombuffer(base64.b64decode(item), dtype="<f4"))
        else:
            rows.append(np.array(item, dtype=np.float32))
    np.testing.assert_allclose(np.stack(rows), expected[picks], atol=1e-6)


def one_request(
    rng: random.Random,
    client: httpx.Client,
    url: str,
    service: EmbeddingService,
    worker: int,
    n: int,
) -> tuple[str, int]:
    """Send one request of a random kind and check its answer; return (kind, status)."""
    roll = rng.random()
    if roll < 0.05:  # over the limit: urllib (Content-Length, Connection: close) or chunked
        body = oversized(rng)
        if rng.random() < 0.5:
            request = urllib.request.Request(url, data=body, headers=JSON, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    status, answer = response.status, json.loads(response.read())
            except urllib.error.HTTPError as error:
                status, answer = error.code, json.loads(error.read())
            kind = "oversized-content-length"
        else:
            response = requests.post(url, data=chunks(body), headers=JSON, timeout=60)
            status, answer, kind = response.status_code, response.json(), "oversized-chunked"
        return kind, check_error(status, answer, "payload_too_large")
    if roll < 0.25:  # invalid
        bodies = [
            (b'{"input": ', "invalid_input"),
            (b'{"input": []}', "invalid_input"),
            (b'{"input": [[]]}', "invalid_input"),
            (b'{"input": [1.5]}', "invalid_input"),
            (b"[1, 2]", "invalid_input"),
            (json.dumps({"input": "x", "model": "other"}).encode(), "model_not_found"),
            (json.dumps({"input": ["x"] * 2049}).encode(), "too_many_inputs"),
            (json.dumps({"input": [[10**9]]}).encode(), "invalid_input"),
        ]
        body, code = rng.choice(bodies)
        response = client.post(url, content=body, headers=JSON)
        return "invalid", check_error(response.status_code, response.json(), code)
    tag = f"w{worker} n{n}"
    if roll < 0.35:  # token ids
        ids = [[rng.randrange(1, 200) for _ in range(rng.randrange(1, 64))] for _ in range(4)]
        response = client.post(url, json={"input": ids, "model": MODEL})
        expected, picks = (lambda: service.embed_token_ids(ids).vectors), [0, 3]
        kind = "token-ids"
    elif roll < 0.45:  # 2048 inputs: the heavy ones
        texts = [f"{tag} text {j}" for j in range(2048)]
        response = client.post(url, json={"input": texts})
        expected, picks = (lambda: service.embed_texts(texts).vectors), [0, 2047]
        kind = "2048-texts"
    else:
        texts = [
            f"{tag} {'a red block ' * rng.randrange(1, 30)}" for _ in range(rng.randrange(1, 9))
        ]
        encoding = "base64" if rng.random() < 0.3 else "float"
        response = client.post(url, json={"input": texts, "encoding_format": encoding})
        expected, picks = (lambda: service.embed_texts(texts).vectors), list(range(len(texts)))
        kind = f"texts-{encoding}"
    if response.status_code == 429:
        return kind, check_error(429, response.json(), "rate_limit_exceeded", response.headers)
    assert response.status_code == 200, (response.status_code, response.text[:300])
    vectors = expected()
    check_vectors(response.json(), vectors, picks)
    return kind, 200


def check_error(status: int, answer: dict[str, Any], code: str, headers: Any = None) -> int:
    assert status < 500, (status, answer)
    assert_openai_error(answer)
    if status == 429:
        assert answer["error"]["code"] == "rate_limit_exceeded"
        assert headers is None or headers["retry-after"] == "1"
    else:
        assert answer["error"]["code"] == code, answer
    return status


def test_one_minute_at_saturation_answers_everything_right_with_bounded_memory(
    service: EmbeddingService,
) -> None:
    tally = Tally()
    health: list[tuple[float, int | str]] = []
    with running_server(
        SIGLIP_MAX_CONCURRENT_REQUESTS=str(IN_FLIGHT),
        SIGLIP_MAX_PENDING_REQUESTS=str(PENDING),
        SIGLIP_TOKEN_ID_INPUTS="accept",  # its token-id requests check the vectors
    ) as server:
        start = time.monotonic()
        end = start + SOAK_SECONDS
        stop = threading.Event()

        def worker(w: int) -> None:
            rng = random.Random(1000 + w)
            with httpx.Client(timeout=60) as client:
                n = 0
                while time.monotonic() < end and n < 20_000:
                    try:
                        kind, status = one_request(rng, client, server.url, service, w, n)
                        tally.count(kind, status)
                    except Exception as exc:
                        tally.fail(f"worker {w} request {n}: {type(exc).__name__}: {exc!s:.300}")
                    n += 1

        def poll_health() -> None:
            with httpx.Client(timeout=10) as client:
                while not stop.is_set():
                    sent = time.monotonic()
                    try:
                        status: int | str = client.get(f"{server.base}/health").status_code
                    except httpx.HTTPError as exc:
                        status = type(exc).__name__
                    health.append((time.monotonic() - sent, status))
                    stop.wait(0.2)

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(CLIENTS)]
        threads.append(threading.Thread(target=poll_health))
        for thread in threads:
            thread.start()
        # GIVEN the warm-up done
        time.sleep(WARMUP_SECONDS)
        after_warmup = server.rss()
        server.reset_peak()
        # WHEN the rest of the minute runs at saturation
        for thread in threads[:-1]:
            thread.join(SOAK_SECONDS + 60)
        stop.set()
        threads[-1].join(15)
        growth = server.peak_rss() - after_warmup
        kept = server.rss() - after_warmup
        server.terminate()
        exit_status = server.wait(timeout=30)

    total = sum(tally.statuses.values())
    slowest = max(latency for latency, _ in health)
    print(
        f"TRIED soak: {total} requests in {SOAK_SECONDS:.0f} s by {CLIENTS} clients: "
        f"{dict(sorted(tally.statuses.items()))}; /health polled {len(health)} times, slowest "
        f"{slowest * 1000:.0f} ms; RSS {after_warmup / MIB:.0f} MiB after warm-up, peak growth "
        f"{growth / MIB:.1f} MiB, at the end {kept / MIB:.1f} MiB (bound {GROWTH_BOUND / MIB:.0f} "
        f"MiB); exit {exit_status}"
    )
    # THEN every answer was right (no 5xx, no reset, nothing unexpected)
    assert not tally.failures, tally.failures[:5]
    kinds = {key.rsplit(" ", 1)[0] for key in tally.statuses}
    assert {"invalid", "oversized-content-length", "oversized-chunked", "2048-texts"} <= kinds
    assert any(key.endswith(" 429") for key in tally.statuses), "never saturated"
    # AND /health answered throughout
    assert {status for _, status in health} == {200}, Counter(s for _, s in health)
    # AND memory after the warm-up stayed within the bound, at its peak and at the end
    assert growth <= GROWTH_BOUND and kept <= GROWTH_BOUND, (growth / MIB, kept / MIB)
