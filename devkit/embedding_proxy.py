"""A loopback HTTP proxy in front of a real `serve`: counts what reaches the server, and can
play an unreliable network or frontend (an answer it makes up first, a delay, a refusal from
some request on). The vectors always come from the real server behind it."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


@dataclass
class Seen:
    """One POST the proxy received: when, how many inputs, what it answered."""

    at: float
    inputs: int
    status: int


@dataclass
class Proxy:
    base: str
    upstream: str
    #: Answers made up for the first POSTs, in order: (status, headers), before forwarding any.
    canned: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    #: Forward this many POSTs, then answer every later one 400 (None: forward all).
    refuse_after: int | None = None
    delay: float = 0.0  # seconds added before each forwarded POST
    seen: list[Seen] = field(default_factory=list)
    active: int = 0  # POSTs being handled now
    lock: threading.Lock = field(default_factory=threading.Lock)

    def forwarded_inputs(self) -> int:
        """Inputs the real server embedded (POSTs it answered 200)."""
        with self.lock:
            return sum(s.inputs for s in self.seen if s.status == 200)

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Until no POST has been handled for 0.2 s (a killed client's last request,
        forwarded all the same, is counted before the test goes on)."""
        deadline = time.monotonic() + timeout
        idle_since: float | None = None
        while True:
            now = time.monotonic()
            with self.lock:
                idle = not self.active
            idle_since = (idle_since or now) if idle else None
            if idle_since is not None and now - idle_since >= 0.2:  # a request just read
                return
            assert now < deadline, "the proxy is still handling a request"
            time.sleep(0.01)

    def reset(self) -> None:
        with self.lock:
            self.seen.clear()
            self.canned.clear()
            self.refuse_after, self.delay = None, 0.0


def _handler(proxy: Proxy) -> type[BaseHTTPRequestHandler]:
    upstream = urlsplit(proxy.upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _forward(self, body: bytes | None) -> tuple[int, bytes]:
            connection = http.client.HTTPConnection(upstream.netloc, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            connection.request(self.command, self.path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            connection.close()
            return response.status, data

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            status, data = self._forward(None)
            self._answer(status, data, {})

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                inputs = len(json.loads(body)["input"])
            except (ValueError, KeyError, TypeError):
                inputs = 0
            with proxy.lock:
                proxy.active += 1
                canned = proxy.canned.pop(0) if proxy.canned else None
                forwarded = sum(1 for s in proxy.seen if s.status == 200)
                refuse = proxy.refuse_after is not None and forwarded >= proxy.refuse_after
                at = time.monotonic()
            if canned is not None:
                status, headers = canned
                error = {"message": "made up by the test proxy", "type": "x", "param": None}
                data = json.dumps({"error": {**error, "code": None}}).encode()
            elif refuse:
                status, headers = 400, {}
                error = {"message": "refused by the test proxy", "type": "invalid_request_error"}
                data = json.dumps({"error": {**error, "param": None, "code": None}}).encode()
            else:
                if proxy.delay:
                    time.sleep(proxy.delay)
                (status, data), headers = self._forward(body), {}
            with proxy.lock:  # recorded before the answer leaves: a client never outruns it
                proxy.seen.append(Seen(at, inputs, status))
            try:
                self._answer(status, data, headers)
            finally:
                with proxy.lock:
                    proxy.active -= 1

    return Handler


@contextmanager
def embedding_proxy(upstream: str) -> Iterator[Proxy]:
    """A proxy on a free loopback port in front of ``upstream`` (a base URL); its `Proxy`."""
    proxy = Proxy(base="", upstream=upstream)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy))
    server.daemon_threads = True
    proxy.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
