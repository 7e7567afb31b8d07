"""`serve`'s connections under uvicorn: the guarded HTTP protocol and the graceful server.

uvicorn arms no timer before a connection's first request and counts idle connections against
its concurrency limit, so its protocol is guarded (`guarded_protocol`):

- a connection must complete its request headers within ``SIGLIP_HEADER_TIMEOUT_SECONDS`` of
  opening (and of its previous answer), else it is closed: a socket that sends nothing, or a
  header line now and then, cannot stay; headers over `MAX_HEADER_BYTES` get a 431;
- at most ``SIGLIP_MAX_CONNECTIONS`` are open; at the cap a new connection closes the one
  idle longest (no request in progress) to make room, and only when every connection has a
  request in progress is the newcomer answered 429 (``Retry-After``); idle connections never
  count against admission, which counts requests (`http.admission`).

The server (`server_class`) is uvicorn's, with the front layer's shutdown grace period.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..engine.errors import OverloadedError

if TYPE_CHECKING:
    from .front import Front

logger = logging.getLogger("siglip_text.serve")

#: The most a request's line and headers may take (h11's own bound is 16 KiB; llhttp, under
#: httptools, has none): past it, a 431 and the connection is closed.
MAX_HEADER_BYTES = 64 * 1024
#: File descriptors the process needs beside its connections (ONNX Runtime, logs, the
#: listening socket, a Secrets Manager connection).
RESERVED_DESCRIPTORS = 64


def descriptors_for(connections: int) -> int:
    """Raise this process's open-file limit (its soft limit, up to the hard one) so that
    ``connections`` fit beside `RESERVED_DESCRIPTORS`; the connections that fit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + RESERVED_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):  # past the kernel's own bound (fs.nr_open)
            pass
    if soft == resource.RLIM_INFINITY:
        return connections
    return max(1, min(connections, soft - RESERVED_DESCRIPTORS))


def guarded_protocol(*, header_timeout: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools when installed, else h11), with the header deadline
    and the connection cap of the module docstring."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    from .errors import error_answer, error_json

    refusal = error_answer(
        OverloadedError(
            "the server has as many connections open as it accepts, each with a request in "
            "progress; retry after the delay in the Retry-After header"
        )
    )
    refused = _raw_answer(refusal.status, refusal.headers, refusal.body)
    too_large = _raw_answer(
        431,
        {},
        error_json(
            f"the request's headers are larger than {MAX_HEADER_BYTES} bytes",
            type="invalid_request_error",
            param=None,
            code="request_header_fields_too_large",
        ),
    )
    cap = max_connections

    class GuardedProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        """One connection: closed when its request headers take too long; at the cap, the
        idlest connection makes room for it."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._header_timer: asyncio.TimerHandle | None = None
            self._header_bytes = 0
            self._idle_since = 0.0

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._await_headers()
            if len(self.connections) > cap and not _make_room(self.connections, self):
                logger.warning("connection refused: %d open, each with a request", cap)
                transport.write(refused)
                transport.close()

        def data_received(self, data: bytes) -> None:
            before = self.cycle
            super().data_received(data)
            if self.cycle is not before:  # a request's headers are complete
                self._stop_waiting()
            elif self._header_timer is not None:
                self._header_bytes += len(data)
                if self._header_bytes > MAX_HEADER_BYTES and not self.transport.is_closing():
                    self.transport.write(too_large)
                    self.transport.close()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and _idle(self):
                self._await_headers()  # the next request on this connection

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            super().connection_lost(exc)

        def _await_headers(self) -> None:
            self._stop_waiting()
            self._header_bytes = 0
            self._idle_since = self.loop.time()
            self._header_timer = self.loop.call_later(header_timeout, self._headers_late)

        def _stop_waiting(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if _idle(self) and not self.transport.is_closing():
                self.transport.close()

    return GuardedProtocol


def _idle(connection: Any) -> bool:
    """No request in progress: waiting for (the rest of) its next request's headers."""
    return connection.cycle is None or bool(connection.cycle.response_complete)


def _make_room(connections: set[Any], newcomer: Any) -> bool:
    """Close the connection idle longest (not ``newcomer``); False when none is idle."""
    idle = [
        c for c in connections if c is not newcomer and _idle(c) and not c.transport.is_closing()
    ]
    if not idle:
        return False
    min(idle, key=lambda c: getattr(c, "_idle_since", 0.0)).transport.close()
    return True


def _raw_answer(status: int, headers: dict[str, str], body: bytes) -> bytes:
    """An HTTP/1.1 answer as bytes, for a connection that has not sent its request yet."""
    from http import HTTPStatus

    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        *(f"{name.lower()}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def server_class() -> type[Any]:
    import uvicorn

    class _GracefulServer(uvicorn.Server):
        """uvicorn's server, with the front layer's grace period on shutdown."""

        def __init__(self, config: Any, *, front: Front, grace_seconds: float) -> None:
            super().__init__(config)
            self.front = front
            self.grace_seconds = grace_seconds

        async def shutdown(self, sockets: Any = None) -> None:
            # uvicorn's own shutdown closes the listeners, then waits for every connection;
            # once the grace period's 503s are out, `force_exit` ends that wait (computations
            # still running are abandoned: ONNX Runtime cannot be interrupted mid-run).
            self.front.begin_shutdown(self.grace_seconds, on_expired=self._expired)
            await super().shutdown(sockets)

        def _expired(self) -> None:
            self.force_exit = True

    return _GracefulServer
