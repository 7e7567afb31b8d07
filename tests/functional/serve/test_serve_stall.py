"""A `serve` no one can stall: trickled bodies, keyless uploads, other media types, foreign
Host names and too many connections, against a real `siglip-text serve --demo`."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, suppress

import httpx
import pytest

from devkit.keys import KEY
from devkit.openai_shapes import assert_openai_error
from devkit.servers import LiveServer, running_server
from devkit.servers import keyed_server as running_keyed_server

pytestmark = pytest.mark.slow  # server subprocesses

BODY = json.dumps({"input": ["a red block on the table"] * 4}).encode()
TRICKLERS = 40


def open_upload(
    port: int, *, declared: int = len(BODY), headers: bytes = b"", first: bytes = b""
) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s"
        % (headers, declared, first)
    )
    return sock


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed without an answer: {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        body += sock.recv(65536)
    return int(lines[0].split()[1]), headers, body


class Tricklers:
    """Uploads that send one byte of their body every 0.2 s, from one thread."""

    def __init__(self, port: int, count: int, headers: bytes = b"") -> None:
        self.socks = [
            open_upload(port, declared=100_000, headers=headers, first=b"{") for _ in range(count)
        ]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._trickle, daemon=True)
        self._thread.start()

    def _trickle(self) -> None:
        while not self._stop.wait(0.2):
            for sock in self.socks:
                with suppress(OSError):
                    sock.send(b" ")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for sock in self.socks:
            sock.close()


JSON = {"content-type": "application/json"}


def ordinary_request(server: LiveServer, key: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(server.url, content=BODY, headers={**headers, **JSON}, timeout=30)


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with running_server(SIGLIP_AUTH_MODE="none") as live:
        yield live


def test_forty_clients_trickling_bodies_do_not_keep_an_ordinary_request_out(
    server: LiveServer,
) -> None:
    # GIVEN 40 uploads trickling their bodies (more than the 1 + 32 admissions)
    tricklers = Tricklers(server.port, TRICKLERS)
    try:
        time.sleep(1.5)
        # WHEN an ordinary client posts a request
        started = time.monotonic()
        response = ordinary_request(server)
        elapsed = time.monotonic() - started
        # THEN it is served within seconds
        assert response.status_code == 200, response.text
        assert len(response.json()["data"]) == 4
        assert elapsed < 5, elapsed
    finally:
        tricklers.close()


@pytest.mark.parametrize(
    ("setting", "trickle", "message"),
    [
        ("SIGLIP_BODY_IDLE_TIMEOUT_SECONDS", False, "sent nothing for 1 seconds"),
        ("SIGLIP_BODY_TOTAL_TIMEOUT_SECONDS", True, "was not complete after 1 seconds"),
    ],
)
def test_a_body_too_slow_gets_408(setting: str, trickle: bool, message: str) -> None:
    # GIVEN a server whose idle (or total) body timeout is 1 s, and an upload that stops
    # after its first byte (or trickles a byte every 0.2 s)
    with running_server(SIGLIP_AUTH_MODE="none", **{setting: "1"}) as live:
        uploads = Tricklers(live.port, 1 if trickle else 0)
        sock = uploads.socks[0] if trickle else open_upload(live.port, declared=100_000, first=b"{")
        try:
            started = time.monotonic()
            status, _, body = read_answer(sock)
            elapsed = time.monotonic() - started
        finally:
            uploads.close()
            sock.close()
    # THEN it gets a 408 in OpenAI's shape once the timeout has passed
    assert status == 408, body
    assert_openai_error(json.loads(body))
    assert message in json.loads(body)["error"]["message"]
    assert elapsed < 10


def test_a_body_that_is_not_json_gets_415(server: LiveServer) -> None:
    response = httpx.post(
        server.url, content=b'{"input": "a cat"}', headers={"content-type": "text/plain"}
    )
    assert response.status_code == 415
    assert_openai_error(response.json())
    assert response.json()["error"]["code"] == "unsupported_media_type"
    charset = {"content-type": "application/json; charset=utf-8"}
    assert httpx.post(server.url, content=BODY, headers=charset).status_code == 200


def test_a_server_on_loopback_answers_loopback_host_names_only(server: LiveServer) -> None:
    # A page that rebinds its DNS name to 127.0.0.1 sends its own name as Host
    for host in ("attacker.example", "attacker.example:8000", "10.0.0.1"):
        response = httpx.get(f"{server.base}/health", headers={"host": host})
        assert response.status_code == 400, host
        assert_openai_error(response.json())
        assert response.json()["error"]["code"] == "invalid_host"
        posted = httpx.post(server.url, content=BODY, headers={**JSON, "host": host})
        assert posted.status_code == 400
    for host in ("localhost", f"127.0.0.1:{server.port}", f"[::1]:{server.port}"):
        assert httpx.get(f"{server.base}/health", headers={"host": host}).status_code == 200


def test_connections_past_the_limit_are_refused() -> None:
    with running_server(SIGLIP_AUTH_MODE="none", SIGLIP_MAX_CONNECTIONS="4") as live:
        with ExitStack() as stack:
            # GIVEN 4 connections (the limit), each with a request in progress (a body held)
            busy = [
                stack.enter_context(open_upload(live.port, declared=100_000, first=b"{"))
                for _ in range(4)
            ]
            time.sleep(0.3)
            assert busy
            # WHEN another client connects, THEN it is refused in OpenAI's shape
            response = httpx.get(f"{live.base}/health", timeout=10)
            assert response.status_code == 429, response.text
            assert_openai_error(response.json())
            assert response.headers["retry-after"] == "1"
        deadline = time.monotonic() + 5
        while httpx.get(f"{live.base}/health").status_code != 200:
            assert time.monotonic() < deadline
        # AND connections that hold no request give way to a newcomer
        with ExitStack() as stack:
            for _ in range(4):
                stack.enter_context(socket.create_connection(("127.0.0.1", live.port)))
            time.sleep(0.3)
            assert httpx.get(f"{live.base}/health", timeout=10).status_code == 200


@pytest.fixture(scope="module")
def keyed_server() -> Iterator[LiveServer]:
    with running_keyed_server() as live:
        yield live


def test_a_keyless_upload_is_refused_before_its_body_is_read(keyed_server: LiveServer) -> None:
    # GIVEN an upload that sends its headers, without a key, and holds its 100 kB body back
    with open_upload(keyed_server.port, declared=100_000) as sock:
        # THEN it is answered 401 at once: its body was never waited for
        status, headers, body = read_answer(sock)
    assert status == 401
    assert headers["www-authenticate"] == "Bearer"
    assert_openai_error(json.loads(body))
    # AND a wrong key is refused the same way
    wrong = b"Authorization: Bearer sk-wrong-0123456789abcdef\r\n"
    with open_upload(keyed_server.port, declared=100_000, headers=wrong) as sock:
        assert read_answer(sock)[0] == 401


def test_keyless_tricklers_never_hold_a_place_a_keyed_request_needs(
    keyed_server: LiveServer,
) -> None:
    tricklers = Tricklers(keyed_server.port, TRICKLERS)
    try:
        time.sleep(0.5)
        started = time.monotonic()
        response = ordinary_request(keyed_server, KEY)
        assert response.status_code == 200, response.text
        assert time.monotonic() - started < 5
    finally:
        tricklers.close()
