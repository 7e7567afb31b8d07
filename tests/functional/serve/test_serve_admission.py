"""Admission before the body, against a real `serve` with 2 running and 3 pending slots.

A request takes one of the ``in_flight + pending`` admissions, or gets its 429, before its
body is read; it then reads its body and waits for a running slot, in which the app parses
and serves it. So at most ``in_flight + pending`` bodies are held, and at most ``in_flight``
are parsed and embedded, whatever the clients send.

The memory bound, for peak RSS growth over a burst (``-rP`` prints the figures):

    (in_flight + pending) x W  +  clients x 1 MiB,   W = 7 x limit = 42 MiB

- at most ``in_flight + pending`` requests are inside the server at once, and each holds at
  most W: its body (twice the 6 MiB limit while it is joined) and, once running, what parsing,
  tokenizing and embedding it cost. W is an allowance over what the costliest of these bodies
  cost served alone after a warm-up: 18 to 28 MiB for one text of 3 million words, 27 to 40
  MiB for 2048 texts of 2,900 characters (measured; 40 MiB is 6.6 x the limit). A waiting request
  holds only its body, but memory one request frees is not always reusable by the next
  (glibc keeps it in the arena of the thread that freed it), so each admission counts W;
- every other connection holds what the event loop has read of a body it does not want yet
  or drops: one socket read (256 KiB), its copy in h11's buffer and in uvicorn's (64 KiB
  before it stops reading, plus that read), under 1 MiB.

That is 260 MiB for 50 clients, below the 300 MiB that their bodies alone take. Before this,
every body was read and parsed before admission: the same burst grew the server by 330 MiB
and reset 8 of the 50 clients (measured); it now grows it by 57 to 178 MiB (measured over a
dozen runs on a shared 2-core machine). The warm-up runs each kind of request ``in_flight``
at a time, so that the worker threads' first allocations are not counted as the burst's.
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
from siglip_text.engine.service import EmbeddingService

from devkit.openai_shapes import assert_openai_error
from devkit.servers import MIB, LiveServer, running_server

pytestmark = pytest.mark.slow  # server subprocesses and 6 MB bodies


IN_FLIGHT, PENDING = 2, 3
CLIENTS = 50
LIMIT = 6 * MIB
W = 7 * LIMIT
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
    for kind in kinds:  # warm-up, in_flight at a time: the worker threads' first allocations
        concurrent_statuses(server, [kind(j)[0] for j in range(IN_FLIGHT)])
    bound = (IN_FLIGHT + PENDING) * W + CLIENTS * MIB
    assert bound < CLIENTS * LIMIT  # below "every body in memory"

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
        b"POST /v1/embeddings HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
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


def test_uploads_abandoned_mid_body_give_their_admission_back(server: LiveServer) -> None:
    body = json.dumps({"input": ["an abandoned upload"] * 10}).encode()
    # GIVEN every admission held by an upload that stops after its first bytes
    stalled = [
        stalled_upload(server.port, len(body), body[:10]) for _ in range(IN_FLIGHT + PENDING)
    ]
    time.sleep(0.3)
    # WHEN those clients hang up
    for sock in stalled:
        sock.close()
    # THEN the whole room serves again: as many concurrent requests as it holds, all 200
    deadline = time.monotonic() + 10
    statuses = concurrent_statuses(server, [body] * (IN_FLIGHT + PENDING))
    while statuses != [200] * (IN_FLIGHT + PENDING) and time.monotonic() < deadline:
        time.sleep(0.2)
        statuses = concurrent_statuses(server, [body] * (IN_FLIGHT + PENDING))
    assert statuses == [200] * (IN_FLIGHT + PENDING)


def concurrent_statuses(server: LiveServer, bodies: list[bytes]) -> list[int]:
    """Post the bodies at once; their statuses."""
    count = len(bodies)
    statuses = [0] * count

    def one(i: int) -> None:
        statuses[i] = post(server.url, bodies[i], chunked=False)[0]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return statuses
