"""Admission before the body, against a real `serve` with 2 running and 3 pending slots.

A request takes one of the ``in_flight + pending`` admissions, or gets its 429, before its
body is read; it then reads its body and waits for a running slot, in which the app parses
and serves it. So at most ``in_flight + pending`` bodies are held, and at most ``in_flight``
are parsed and embedded, whatever the clients send.

The memory bound, for peak RSS growth over a burst (``-rP`` prints the figures):

    in_flight x W  +  pending x 2 x limit  +  clients x 512 KiB

- ``W``: the peak RSS growth of the costliest of these requests served alone (body, parse,
  tokens, vectors, answer), measured first in the same server;
- a pending request holds its body: while it is joined, twice ``limit`` (6 MiB) at most;
- every other connection holds what the event loop has read of its body but not handed on:
  one socket read (256 KiB) and uvicorn's buffer (64 KiB) before it stops reading.

Before this, every body was read and parsed before admission: the same burst grew the
server by 330 MiB (measured, against 86 MiB now) and reset 8 of the 50 clients.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest
from siglip_text.embedding import EmbeddingService

from tests.openai_shapes import assert_openai_error
from tests.support.live_server import MIB, LiveServer, running_server

IN_FLIGHT, PENDING = 2, 3
CLIENTS = 50
LIMIT = 6 * MIB
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with running_server(
        SIGLIP_MAX_CONCURRENT_REQUESTS=str(IN_FLIGHT), SIGLIP_MAX_PENDING_REQUESTS=str(PENDING)
    ) as live:
        yield live


def one_long_text(i: int) -> tuple[bytes, list[str]]:
    """A valid 6 MB body: one text of 3 million words (cheap to tokenize: a prefix window)."""
    text = "a " * 2_999_990 + str(i)
    return json.dumps({"input": text}).encode(), [text]


def many_texts(i: int) -> tuple[bytes, list[str]]:
    """A valid 6 MB body: 2048 texts of about 2,900 characters."""
    texts = [f"{'a ' * 1450}{i} {j}" for j in range(2048)]
    return json.dumps({"input": texts}).encode(), texts


def too_large(i: int) -> tuple[bytes, list[str]]:
    return b'{"input": "' + b"a" * LIMIT + b'%d"}' % i, []


def chunks(body: bytes) -> Iterator[bytes]:
    for start in range(0, len(body), 256 * 1024):
        yield body[start : start + 256 * 1024]


def post(url: str, body: bytes, *, chunked: bool) -> tuple[int, dict[str, object]]:
    """urllib: it sends the whole body before reading, and ``Connection: close``."""
    data: object = chunks(body) if chunked else body
    request = urllib.request.Request(url, data=data, headers=JSON, method="POST")  # type: ignore[arg-type]
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_burst_of_6mb_bodies_grows_memory_by_the_slots_not_the_clients(
    server: LiveServer, service: EmbeddingService
) -> None:
    kinds = [one_long_text, many_texts, too_large]
    for kind in kinds:  # warm-up: first allocations, caches, thread pool
        for i in range(2):
            post(server.url, kind(i)[0], chunked=False)
    # GIVEN W, the peak growth of the costliest request served alone
    alone = {}
    for kind in (one_long_text, many_texts):
        time.sleep(0.2)
        before = server.rss()
        server.reset_peak()
        status, _ = post(server.url, kind(7)[0], chunked=False)
        assert status == 200
        alone[kind.__name__] = server.peak_rss() - before
    w = max(alone.values())
    bound = IN_FLIGHT * w + PENDING * 2 * LIMIT + CLIENTS * 512 * 1024
    assert bound < CLIENTS * LIMIT / 2  # a bound far below "every body in memory"

    # WHEN 50 clients send 6 MB bodies at once (a third over the limit; half of all chunked)
    requests = [(kinds[i % 3](100 + i), i % 2 == 1) for i in range(CLIENTS)]
    answers: list[tuple[int, dict[str, object]] | BaseException] = [ValueError()] * CLIENTS
    start = threading.Barrier(CLIENTS)

    def client(i: int) -> None:
        (body, _), chunked = requests[i]
        start.wait()
        try:
            answers[i] = post(server.url, body, chunked=chunked)
        except BaseException as exc:  # a reset would land here
            answers[i] = exc

    time.sleep(0.2)
    before = server.rss()
    server.reset_peak()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    growth = server.peak_rss() - before

    # THEN every client got 200, 413 or 429, each correct
    statuses = Counter(a[0] if isinstance(a, tuple) else repr(a) for a in answers)
    print(
        f"TRIED burst: {CLIENTS} x 6 MB, {IN_FLIGHT} running + {PENDING} pending: "
        f"{dict(statuses)}; "
        f"W = {', '.join(f'{k} {v / MIB:.1f}' for k, v in alone.items())} MiB; "
        f"peak RSS growth {growth / MIB:.1f} MiB, bound {bound / MIB:.1f} MiB"
    )
    assert set(statuses) <= {200, 413, 429}, statuses
    assert statuses[200] >= IN_FLIGHT and statuses[429] > 0, statuses
    for i, answer in enumerate(answers):
        assert isinstance(answer, tuple)
        status, body = answer
        (_, texts), _ = requests[i]
        if status == 200:
            assert texts, "an oversized body was served"
            got = np.array([d["embedding"] for d in body["data"]], dtype=np.float32)  # type: ignore[index]
            np.testing.assert_allclose(got, service.embed_texts(texts).vectors, atol=1e-6)
        else:
            assert_openai_error(body)
            assert status != 413 or not texts
    # AND the peak memory grew within the bound
    assert growth <= bound, f"{growth / MIB:.1f} MiB > {bound / MIB:.1f} MiB"


def stalled_upload(port: int, declared: int, first: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        b"POST /v1/embeddings HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (declared, first)
    )
    return sock


def read_answer(sock: socket.socket) -> tuple[int, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(
            line.split(b":")[1]
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
    )
    while len(body) < length:
        body += sock.recv(65536)
    return int(head.split()[1]), body


def test_request_is_refused_before_its_body_when_admission_is_full(server: LiveServer) -> None:
    body = json.dumps({"input": ["a slow upload"] * 1000}).encode()
    # GIVEN as many uploads as there are admissions, each stalled after its first bytes
    stalled = [
        stalled_upload(server.port, len(body), body[:100]) for _ in range(IN_FLIGHT + PENDING)
    ]
    try:
        time.sleep(0.3)
        # WHEN one more request sends its headers only
        with stalled_upload(server.port, len(body), b"") as late:
            # THEN it is refused at once, 429 with Retry-After, its body never asked for
            status, answer = read_answer(late)
        assert status == 429
        assert_openai_error(json.loads(answer))
        # AND bodyless requests still pass (they take no admission)
        with urllib.request.urlopen(f"{server.base}/health", timeout=5) as health:
            assert health.status == 200
        # AND when the stalled uploads finish, each is served
        for sock in stalled:
            sock.sendall(body[100:])
        for sock in stalled:
            status, answer = read_answer(sock)
            assert status == 200, answer[:300]
            assert len(json.loads(answer)["data"]) == 1000
    finally:
        for sock in stalled:
            sock.close()
