"""`siglip-text serve`: the same app under uvicorn, behind `ingress.Ingress`.

The ingress checks the key and the media type before a request takes its admission, takes
the admission before its body is read, bounds the body in size and time (408), makes every
early answer (401, 413, 415, 429, 503) reach the client, checks ``Host`` when bound to
loopback, and holds the shutdown grace period. uvicorn bounds the open connections
(``SIGLIP_MAX_CONNECTIONS``: past it, its own plain-text 503).

SIGTERM (or Ctrl-C): uvicorn stops accepting connections and closes idle ones; requests
running or waiting go on for ``SIGLIP_SHUTDOWN_GRACE_SECONDS``; those not answered by then
get a 503 and the process exits. It exits as uvicorn and Python do on a signal, by the signal
itself: status 143 (128 + SIGTERM) for SIGTERM, 130 for SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING, Any

from .engine.config import demo_model_dir, load_settings
from .engine.errors import SiglipError

if TYPE_CHECKING:
    from .http.front import Ingress


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
    from .engine.loading import load_service
    from .http.admission import Admission
    from .http.app import create_app
    from .http.front import LOOPBACK_HOSTS, Ingress
    from .http.observability import LoggingObserver

    overrides: dict[str, object] = {}
    if args.demo:
        overrides["model_dir"] = demo_model_dir()
    elif args.model_dir:
        overrides["model_dir"] = args.model_dir
    observer = LoggingObserver()
    try:
        settings = load_settings(**overrides)
        service = load_service(settings)
        authenticator = None
        if settings.auth_mode == "api-key":
            from .http.auth import build_authenticator

            # Reads of the secret in a thread of their own: no request waits for one.
            authenticator = build_authenticator(
                settings, background=True, on_refresh_failed=observer.key_refresh_failed
            )
    except SiglipError as exc:
        print(f"siglip-text serve: cannot start: {exc.message}", file=sys.stderr)
        return 1
    app = create_app(service, settings, observer=observer, authenticator=authenticator)
    # The app keeps its own admission (it bounds the work wherever the app is mounted); behind
    # the ingress, which lets at most `in_flight` requests into the app, it never refuses.
    ingress = Ingress(
        app,
        admission=Admission(
            in_flight=settings.max_concurrent_requests, pending=settings.max_pending_requests
        ),
        max_body_bytes=settings.max_request_bytes,
        observer=observer,
        authenticate=authenticator,
        body_idle_seconds=settings.body_idle_timeout_seconds,
        body_total_seconds=settings.body_total_timeout_seconds,
        allowed_hosts=(
            LOOPBACK_HOSTS | {name.lower() for name in args.allow_host}
            if is_loopback(args.host)
            else None
        ),
    )
    logging.getLogger("siglip_text").info(
        "serving %s (revision %s, dimension %d, contract %s) on http://%s:%d/v1",
        service.model_id,
        service.revision,
        service.dimension,
        service.fingerprint,
        args.host,
        args.port,
    )
    logging.getLogger("siglip_text").info(
        "runtime %s, %d ONNX Runtime thread(s), init %s",
        service.describe()["runtime"],
        service.intra_op_threads,
        service.init_timings.as_dict(),
    )
    config = uvicorn.Config(
        ingress,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        limit_concurrency=settings.max_connections,
    )
    server = _server_class()(config, ingress=ingress, grace_seconds=settings.shutdown_grace_seconds)
    try:
        server.run()  # on SIGTERM, uvicorn re-raises it once drained: the process ends by it
    except KeyboardInterrupt:  # uvicorn re-raises SIGINT too, as KeyboardInterrupt
        return 130
    return 0


def is_loopback(host: str) -> bool:
    """Whether a bind address is reachable from this machine only (no Host check otherwise:
    a server bound to a network address is reached under names this one cannot know)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _server_class() -> type[Any]:
    import uvicorn

    class _GracefulServer(uvicorn.Server):
        """uvicorn's server, with the ingress's grace period on shutdown."""

        def __init__(self, config: Any, *, ingress: Ingress, grace_seconds: float) -> None:
            super().__init__(config)
            self.ingress = ingress
            self.grace_seconds = grace_seconds

        async def shutdown(self, sockets: Any = None) -> None:
            # uvicorn's own shutdown closes the listeners, then waits for every connection;
            # once the grace period's 503s are out, `force_exit` ends that wait (computations
            # still running are abandoned: ONNX Runtime cannot be interrupted mid-run).
            self.ingress.begin_shutdown(self.grace_seconds, on_expired=self._expired)
            await super().shutdown(sockets)

        def _expired(self) -> None:
            self.force_exit = True

    return _GracefulServer
