"""A `serve` that idle or slow sockets cannot stop, against a real `siglip-text serve --demo`:
the header deadline from a connection's opening, idle connections that never count against
admission, a connection cap with room for hundreds of idle sockets, bodies refused before
they are read where no route takes one or no key comes with them, and no `serve` bound
beyond loopback without an auth mode.

``-rP`` shows what each attack got (lines starting TRIED).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, suppress

import httpx
import pytest

from devkit.keys import KEY
from devkit.servers import LiveServer, free_port
from devkit.servers import keyed_server as running_keyed_server

pytestmark = pytest.mark.slow  # server subprocesses

BODY = json.dumps({"input": ["a red block on the table"] * 4}).encode()
SILENT = 150
SLOW_HEADERS = 150
KEYLESS_BODIES = 40
DECLARED = 5_000_000  # bytes each keyless body says it has
CHUNK, EVERY = 1_000, 0.05  # 20 kB/s
HEADER_TIMEOUT = 3.0
KEYED_REQUESTS = 20


@pytest.fixture(scope="module")
def keyed_server() -> Iterator[LiveServer]:
    with running_keyed_server(SIGLIP_HEADER_TIMEOUT_SECONDS=str(HEADER_TIMEOUT)) as live:
        yield live


def connect(port: int, first: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    if first:
        sock.sendall(first)
    return sock


def answer_status(sock: socket.socket) -> int | str:
    """The status of the answer waiting on a socket, or how the socket ended without one."""
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                return "closed" if not data else f"partial {data[:40]!r}"
            data += chunk
    except ConnectionResetError:
        return "reset"
    except TimeoutError:
        return "no answer"
    return int(data.split(b"\r\n", 1)[0].split()[1])


class Attack:
    """Sockets that hold a connection open: silent, one header line now and then, or keyless
    bodies trickled at 20 kB/s; one thread feeds them."""

    def __init__(self, port: int) -> None:
        head = b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        self.silent = [connect(port) for _ in range(SILENT)]
        self.slow_headers = [connect(port, head % b"/v1/embeddings") for _ in range(SLOW_HEADERS)]
        self.bodies = [
            connect(port, head % path + b"Content-Length: %d\r\n\r\n" % DECLARED)
            for path in (b"/health", b"/v1/embeddings")
            for _ in range(KEYLESS_BODIES // 2)
        ]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._feed, daemon=True)
        self._thread.start()

    def _feed(self) -> None:
        ticks = 0
        while not self._stop.wait(EVERY):
            ticks += 1
            for sock in self.bodies:
                with suppress(OSError):
                    sock.send(b" " * CHUNK)
            if ticks % 40 == 0:  # a header line every 2 s: each one before any timer of 5 s
                for sock in self.slow_headers:
                    with suppress(OSError):
                        sock.send(b"X-Slow: 1\r\n")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for sock in self.silent + self.slow_headers + self.bodies:
            sock.close()


def test_idle_sockets_slow_headers_and_keyless_slow_bodies_leave_a_keyed_client_served(
    keyed_server: LiveServer,
) -> None:
    # GIVEN 150 silent sockets, 150 sending a header line every 2 s and 40 keyless bodies
    # (half to POST /health) trickled at 20 kB/s, all open at once
    attack = Attack(keyed_server.port)
    try:
        time.sleep(1.0)
        # WHEN a client with the key asks, again and again, each time on a new connection
        statuses, slowest = Counter[int](), 0.0
        for _ in range(KEYED_REQUESTS):
            started = time.monotonic()
            response = httpx.post(
                keyed_server.url,
                content=BODY,
                headers={"content-type": "application/json", "authorization": f"Bearer {KEY}"},
                timeout=30,
            )
            slowest = max(slowest, time.monotonic() - started)
            statuses[response.status_code] += 1
        # THEN every one is answered 200 within seconds
        assert statuses == {200: KEYED_REQUESTS}, statuses
        assert slowest < 5, slowest
        # AND each keyless body got its 401 without being read, and the sockets that never
        # completed their headers were closed once the header deadline passed
        for sock in attack.bodies:
            sock.settimeout(10)
        keyless = Counter(answer_status(sock) for sock in attack.bodies)
        time.sleep(HEADER_TIMEOUT + 1.0)
        for sock in attack.silent + attack.slow_headers:
            sock.settimeout(5)
        silent = Counter(answer_status(sock) for sock in attack.silent)
        slow = Counter(answer_status(sock) for sock in attack.slow_headers)
    finally:
        attack.close()
    print(
        f"TRIED serve under attack: keyed {dict(statuses)} (slowest {slowest:.2f} s); "
        f"keyless bodies {dict(keyless)}; silent sockets {dict(silent)}; "
        f"slow headers {dict(slow)}"
    )
    assert keyless == {401: KEYLESS_BODIES}, keyless
    assert set(silent) <= {"closed", "reset"}, silent
    assert set(slow) <= {"closed", "reset"}, slow


def test_a_socket_that_never_completes_its_headers_is_closed_by_the_deadline(
    keyed_server: LiveServer,
) -> None:
    # GIVEN a connection that sends nothing, and one that sends a header line every 0.5 s
    with ExitStack() as stack:
        silent = stack.enter_context(connect(keyed_server.port))
        slow = stack.enter_context(connect(keyed_server.port, b"GET /health HTTP/1.1\r\n"))
        started = time.monotonic()
        while time.monotonic() - started < HEADER_TIMEOUT + 2:
            with suppress(OSError):
                slow.send(b"X-Slow: 1\r\n")
            time.sleep(0.5)
        # THEN both were closed by the server, counted from the connection's opening
        for sock in (silent, slow):
            sock.settimeout(5)
            assert answer_status(sock) in ("closed", "reset")


def test_headers_past_64_kib_get_a_431_and_the_connection_closed(
    keyed_server: LiveServer,
) -> None:
    # GIVEN a request line followed by one endless header, sent fast
    with connect(keyed_server.port, b"GET /health HTTP/1.1\r\nX-Big: ") as sock:
        with suppress(OSError):
            for _ in range(100):
                sock.sendall(b"a" * 1024)
        # THEN the server answers 431 once past the bound, and closes
        sock.settimeout(5)
        assert answer_status(sock) in (431, "reset")


def test_a_body_is_refused_before_it_is_read_where_no_route_takes_one(
    keyed_server: LiveServer,
) -> None:
    # GIVEN requests with the key that declare a 5 MB body and send none of it
    head = (
        b"%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Length: 5000000\r\n\r\n"
    )
    cases = {(b"POST", b"/health"): 405, (b"GET", b"/health"): 413, (b"POST", b"/embeddings"): 404}
    for (method, path), status in cases.items():
        with connect(keyed_server.port, head % (method, path)) as sock:
            # THEN each is answered at once, its body never waited for
            sock.settimeout(5)
            assert answer_status(sock) == status, (method, path)


def test_serve_beyond_loopback_without_an_auth_mode_refuses_to_start() -> None:
    # GIVEN no SIGLIP_AUTH_MODE and a bind address reachable from other machines
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGLIP_")}
    command = [sys.executable, "-m", "siglip_text.cli", "serve", "--demo"]
    port = str(free_port())
    process = subprocess.Popen(
        [*command, "--host", "0.0.0.0", "--port", port],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        # THEN it exits at once with status 1, saying how to state one
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise AssertionError("serve started on 0.0.0.0 without an auth mode") from None
    assert process.returncode == 1, stderr
    message = stderr.decode()
    assert "no auth mode is set" in message and "--auth-mode none" in message, message
