"""A body over the limit is answered 413 at every client, not reset, against a real `serve`.

Clients that send their whole body before they read the answer (Python's ``urllib``, which
also sends ``Connection: close``, and ``requests``) would get ``ConnectionResetError`` from a
server that answered and closed with unread bytes still arriving (the kernel resets such a
connection). So the front layer answers, reads and drops the rest of the body (bounded),
then closes. Each client is tried with a ``Content-Length`` body and a chunked one (the openai
client always sends a ``Content-Length``).
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
import requests

from devkit.openai_shapes import assert_openai_error
from devkit.servers import LiveServer, running_server

pytestmark = pytest.mark.slow  # server subprocesses and 7 to 40 MB bodies


LIMIT = 6 * 1024 * 1024
MESSAGE = f"request body is larger than {LIMIT} bytes"
JSON = {"content-type": "application/json"}
#: Over the limit, as in the report (7 MB), and far over it (still within the drain bound).
SIZES = [7 * 1024 * 1024, 40 * 1024 * 1024]


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with running_server() as live:
        yield live


def oversized_body(size: int) -> bytes:
    head, tail = b'{"input": "', b'"}'
    return head + b"a" * (size - len(head) - len(tail)) + tail


def chunks(body: bytes, size: int = 256 * 1024) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


def with_urllib(url: str, body: bytes, chunked: bool) -> tuple[int, dict[str, str], Any]:
    data: Any = chunks(body) if chunked else body  # an iterable is sent chunked
    request = urllib.request.Request(url, data=data, headers=JSON, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def with_requests(url: str, body: bytes, chunked: bool) -> tuple[int, dict[str, str], Any]:
    data: Any = chunks(body) if chunked else body  # a generator is sent chunked
    response = requests.post(url, data=data, headers=JSON, timeout=60)
    return response.status_code, dict(response.headers), response.json()


def with_httpx(url: str, body: bytes, chunked: bool) -> tuple[int, dict[str, str], Any]:
    content: Any = chunks(body) if chunked else body
    response = httpx.post(url, content=content, headers=JSON, timeout=60)
    return response.status_code, dict(response.headers), response.json()


CLIENTS: dict[str, Callable[[str, bytes, bool], tuple[int, dict[str, str], Any]]] = {
    "urllib": with_urllib,
    "requests": with_requests,
    "httpx": with_httpx,
}


@pytest.mark.parametrize("size", SIZES, ids=["7MB", "40MB"])
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("client", list(CLIENTS))
def test_oversized_body_gets_its_413_not_a_reset(
    server: LiveServer, client: str, chunked: bool, size: int
) -> None:
    # GIVEN a body over the limit, sent by a client that may send all of it before reading
    body = oversized_body(size)
    # WHEN it is posted
    status, headers, answer = CLIENTS[client](server.url, body, chunked)
    # THEN the client reads the 413 in OpenAI's shape (no ConnectionResetError)
    assert status == 413, answer
    assert_openai_error(answer)
    assert answer["error"]["message"] == MESSAGE
    assert answer["error"]["code"] == "payload_too_large"
    assert {k.lower(): v for k, v in headers.items()}["connection"] == "close"
    # AND the server serves the next request
    assert httpx.post(server.url, json={"input": "a red block"}, timeout=30).status_code == 200


def test_oversized_input_gets_its_413_through_the_openai_client(server: LiveServer) -> None:
    client = openai.OpenAI(base_url=f"{server.base}/v1", api_key="not-used", max_retries=0)
    with pytest.raises(openai.APIStatusError) as refused:
        client.embeddings.create(model="ignored-by-the-check", input="a " * (LIMIT // 2 + 1))
    assert refused.value.status_code == 413
    assert refused.value.body == {  # openai-python keeps the "error" object as the body
        "message": MESSAGE,
        "type": "invalid_request_error",
        "param": None,
        "code": "payload_too_large",
    }


def test_client_waiting_for_100_continue_gets_the_413_without_sending_its_body(
    server: LiveServer,
) -> None:
    # GIVEN a client that declares a 7 MB body and waits for "100 Continue" before sending it
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/embeddings HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % (7 * 1024 * 1024)
        )
        started = time.monotonic()
        # WHEN it reads: THEN the final 413 comes at once (no 100 Continue, no wait for a body)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.endswith(b"}}"):
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["message"] == MESSAGE
    assert time.monotonic() - started < 1.5  # it did not wait out the 2 s idle bound
