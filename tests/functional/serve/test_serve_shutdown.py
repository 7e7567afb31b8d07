"""Graceful shutdown of a real `serve`: SIGTERM, the grace period, the exit status.

On SIGTERM the server stops accepting connections, finishes what it accepted (running and
waiting requests) within ``SIGLIP_SHUTDOWN_GRACE_SECONDS``, answers whatever is left when the
grace period ends with a 503 in OpenAI's shape (``Connection: close``), and exits by the
signal (status 143, ``-15`` from Popen).
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from siglip_text.engine.service import EmbeddingService

from devkit.openai_shapes import assert_openai_error
from devkit.servers import LiveServer, running_server

pytestmark = pytest.mark.slow  # server subprocesses and their grace periods


JSON = {"content-type": "application/json"}
#: Enough texts per request to keep the demo model busy a sizeable part of a second.
TEXTS = 2048


def texts_of(i: int) -> list[str]:
    return [f"request {i} text {j}: a red block" for j in range(TEXTS)]


def post(url: str, texts: list[str]) -> tuple[int, dict[str, str], dict[str, Any]]:
    body = json.dumps({"input": texts}).encode()
    request = urllib.request.Request(url, data=body, headers=JSON, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def in_threads(count: int, work: Callable[[int], Any]) -> tuple[list[Any], list[threading.Thread]]:
    results: list[Any] = [None] * count

    def run(i: int) -> None:
        try:
            results[i] = work(i)
        except BaseException as exc:  # a reset lands here and fails the test below
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    return results, threads


def check_served(answer: Any, texts: list[str], service: EmbeddingService) -> None:
    status, _, body = answer
    assert status == 200, body
    picks = [0, len(texts) - 1]
    got = np.array([body["data"][p]["embedding"] for p in picks], dtype=np.float32)
    np.testing.assert_allclose(
        got, service.embed_texts([texts[p] for p in picks]).vectors, atol=1e-6
    )


def refused_connection(server: LiveServer) -> bool:
    try:
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_sigterm_finishes_running_and_queued_requests_then_exits_by_the_signal(
    service: EmbeddingService,
) -> None:
    count = 6
    with running_server(
        SIGLIP_MAX_CONCURRENT_REQUESTS="1",
        SIGLIP_MAX_PENDING_REQUESTS="8",
        SIGLIP_SHUTDOWN_GRACE_SECONDS="60",
    ) as server:
        # GIVEN one request running and five waiting
        answers, threads = in_threads(count, lambda i: post(server.url, texts_of(i)))
        time.sleep(1.0)  # all of them connected and admitted
        # WHEN the server gets SIGTERM
        stopped = time.monotonic()
        server.terminate()
        time.sleep(0.3)
        # THEN it accepts no new connection at once
        assert refused_connection(server)
        # AND every accepted request is served, right
        for thread in threads:
            thread.join(60)
        for i, answer in enumerate(answers):
            assert isinstance(answer, tuple), answer
            check_served(answer, texts_of(i), service)
        # AND it exits by the signal (143), soon after the last answer
        assert server.wait(timeout=30) == -signal.SIGTERM
        took = time.monotonic() - stopped
        print(f"TRIED drain: {count} requests served, exit {took:.1f} s after SIGTERM")


def test_requests_past_the_grace_period_get_a_503_not_a_reset(service: EmbeddingService) -> None:
    grace = 0.5
    with running_server(
        SIGLIP_MAX_CONCURRENT_REQUESTS="1",
        SIGLIP_MAX_PENDING_REQUESTS="24",
        SIGLIP_SHUTDOWN_GRACE_SECONDS=str(grace),
    ) as server:
        # GIVEN more accepted work than the grace period can finish: 24 requests of 0.1 to
        # 0.3 s each (by the CPU), and an upload stalled after its first bytes
        answers, threads = in_threads(24, lambda i: post(server.url, texts_of(i)))
        big = json.dumps({"input": "a " * 2_500_000}).encode()
        upload = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        upload.sendall(
            b"POST /v1/embeddings HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(big), big[:100])
        )
        time.sleep(0.6)  # all of them connected and admitted
        # WHEN SIGTERM comes, and the upload goes on (all of it) only after the grace period
        stopped = time.monotonic()
        server.terminate()
        time.sleep(grace + 0.5)
        upload.sendall(big[100:])
        stalled = b""
        while chunk := upload.recv(65536):
            stalled += chunk
        upload.close()
        for thread in threads:
            thread.join(60)
        exit_status = server.wait(timeout=30)
        took = time.monotonic() - stopped

    # THEN every request got an answer: served right, or a 503 that says why, then closed
    statuses = []
    for i, answer in enumerate(answers):
        assert isinstance(answer, tuple), answer  # not ConnectionResetError
        status, headers, body = answer
        statuses.append(status)
        if status == 200:
            check_served(answer, texts_of(i), service)
            continue
        assert status == 503, body
        assert_openai_error(body)
        assert body["error"]["code"] == "server_shutting_down"
        assert body["error"]["type"] == "server_error"
        lowered = {k.lower(): v for k, v in headers.items()}
        assert lowered["connection"] == "close" and lowered["retry-after"] == "1"
    assert 503 in statuses, statuses
    # AND the stalled upload read its 503 after sending its whole body
    assert stalled.startswith(b"HTTP/1.1 503 "), stalled[:200]
    assert json.loads(stalled.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "server_shutting_down"
    # AND the server exited by the signal once those answers were out, not after the work
    assert exit_status == -signal.SIGTERM
    print(
        f"TRIED grace {grace} s: statuses {statuses}, stalled upload 503, exit after {took:.1f} s"
    )
    assert took < grace + 3.0
