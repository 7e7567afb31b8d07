"""`siglip-text serve`: the app under uvicorn, with its connections guarded.

The app's front layer (`http.front.Front`, the same as on Lambda) checks the key before any
body is read, refuses a body on a route that takes none unread, admits a request before its
body is read, bounds the body in size and time (408), makes every early answer reach the
client and holds the shutdown grace period; `serve` adds its own checks to it: JSON bodies
only (415) and, bound to loopback, loopback ``Host`` names only.

Below the app, uvicorn's connections are guarded (`guarded_protocol`), because uvicorn arms
no timer before a connection's first request and counts idle connections against its
concurrency limit:

- a connection must complete its request headers within ``SIGLIP_HEADER_TIMEOUT_SECONDS`` of
  opening (and of its previous answer), else it is closed: a socket that sends nothing, or a
  header line now and then, cannot stay; headers over `MAX_HEADER_BYTES` get a 431;
- at most ``SIGLIP_MAX_CONNECTIONS`` are open; at the cap a new connection closes the one
  idle longest (no request in progress) to make room, and only when every connection has a
  request in progress is the newcomer answered 429 (``Retry-After``); idle connections never
  count against admission, which counts requests (`http.admission`).

The service, the key check and the app come from the one assembly (assembly.py), which
also holds the start rule: bound beyond loopback, `serve` starts only with an explicit auth
mode (``--auth-mode`` or ``SIGLIP_AUTH_MODE``; ``none`` stated on purpose is fine); on
loopback ``serve --demo`` is one command.

SIGTERM (or Ctrl-C): uvicorn stops accepting connections and closes idle ones; requests
running or waiting go on for ``SIGLIP_SHUTDOWN_GRACE_SECONDS``; those not answered by then
get a 503 and the process exits. It exits as uvicorn and Python do on a signal, by the signal
itself: status 143 (128 + SIGTERM) for SIGTERM, 130 for SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import TYPE_CHECKING, Any

from .engine.config import demo_model_dir, load_settings
from .engine.errors import OverloadedError, SiglipError

if TYPE_CHECKING:
    from .http.front import Front

logger = logging.getLogger("siglip_text.serve")

#: The most a request's line and headers may take (h11's own bound is 16 KiB; llhttp, under
#: httptools, has none): past it, a 431 and the connection is closed.
MAX_HEADER_BYTES = 64 * 1024
#: File descriptors the process needs beside its connections (ONNX Runtime, logs, the
#: listening socket, a Secrets Manager connection).
RESERVED_DESCRIPTORS = 64


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--demo",
        action="store_true",
        help="serve the bundled demo model (tiny, trained on synthetic captions)",
    )
    source.add_argument("--model-dir", help="artifact directory (else SIGLIP_* variables)")
    parser.add_argument(
        "--auth-mode",
        choices=["none", "api-key"],
        help="api-key, or none (anyone who reaches the port may use /v1); else "
        "SIGLIP_AUTH_MODE; required when --host is not a loopback address",
    )
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="bound to loopback, also answer requests whose Host is NAME (e.g. a local "
        "reverse proxy's name; repeatable); other names get 400",
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        import uvicorn
    except ImportError:
        print(
            "siglip-text serve needs uvicorn: pip install 'siglip-text-lambda[server]'",
            file=sys.stderr,
        )
        return 2
    from .assembly import Platform, assemble
    from .http.observability import LoggingObserver

    overrides: dict[str, object] = {}
    if args.demo:
        overrides["model_dir"] = demo_model_dir()
    elif args.model_dir:
        overrides["model_dir"] = args.model_dir
    if args.auth_mode:
        overrides["auth_mode"] = args.auth_mode
    try:
        settings = load_settings(**overrides)
        parts = assemble(
            settings,
            Platform.SERVE,
            observer=LoggingObserver(),
            host=args.host,
            allow_hosts=args.allow_host,
        )
    except SiglipError as exc:
        print(f"siglip-text serve: cannot start: {exc.message}", file=sys.stderr)
        return 1
    service = parts.service
    logger.info(
        "serving %s (revision %s, dimension %d, contract %s) on http://%s:%d/v1, auth mode %s",
        service.model_id,
        service.revision,
        service.dimension,
        service.fingerprint,
        args.host,
        args.port,
        settings.auth_mode,
    )
    logger.info(
        "runtime %s, %d ONNX Runtime thread(s), init %s",
        service.describe()["runtime"],
        service.intra_op_threads,
        service.init_timings.as_dict(),
    )
    connections = descriptors_for(settings.max_connections)
    if connections < settings.max_connections:
        logger.warning(
            "at most %d connections (of SIGLIP_MAX_CONNECTIONS=%d): the process may open "
            "only %d files (RLIMIT_NOFILE)",
            connections,
            settings.max_connections,
            connections + RESERVED_DESCRIPTORS,
        )
    config = uvicorn.Config(
        parts.app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        http=guarded_protocol(
            header_timeout=settings.header_timeout_seconds, max_connections=connections
        ),
        ws="none",  # no route takes a WebSocket; an upgrade would leave the guard behind
    )
    server = _server_class()(
        config, front=parts.app.state.front, grace_seconds=settings.shutdown_grace_seconds
    )
    try:
        server.run()  # on SIGTERM, uvicorn re-raises it once drained: the process ends by it
    except KeyboardInterrupt:  # uvicorn re-raises SIGINT too, as KeyboardInterrupt
        return 130
    return 0


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

    from .http.errors import error_answer, error_json

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


def _server_class() -> type[Any]:
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
