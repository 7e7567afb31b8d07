"""`siglip-text serve`: the app under uvicorn, with its connections guarded.

The app's front layer (`http.front.Front`, the same as on Lambda) checks the key before any
body is read, refuses a body on a route that takes none unread, admits a request before its
body is read, bounds the body in size and time (408), makes every early answer reach the
client and holds the shutdown grace period; `serve` adds its own checks to it: JSON bodies
only (415) and, bound to loopback, loopback ``Host`` names only.

Below the app, uvicorn's connections are guarded: a header deadline, a header size bound and
a connection cap (`http.connections`).

Bound beyond loopback, `serve` starts only with an explicit auth mode (``--auth-mode`` or
``SIGLIP_AUTH_MODE``; ``none`` stated on purpose is fine); on loopback ``serve --demo`` is
one command.

SIGTERM (or Ctrl-C): uvicorn stops accepting connections and closes idle ones; requests
running or waiting go on for ``SIGLIP_SHUTDOWN_GRACE_SECONDS``; those not answered by then
get a 503 and the process exits. It exits as uvicorn and Python do on a signal, by the signal
itself: status 143 (128 + SIGTERM) for SIGTERM, 130 for SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .engine.config import ENV_PREFIX, Settings, demo_model_dir, load_settings
from .engine.errors import ConfigError, SiglipError
from .http.connections import (
    RESERVED_DESCRIPTORS,
    descriptors_for,
    guarded_protocol,
    server_class,
)

if TYPE_CHECKING:
    from .engine.service import EmbeddingService
    from .http.app import Authenticator, RequestObserver

logger = logging.getLogger("siglip_text.serve")


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
    from .engine.loading import load_service
    from .http.observability import LoggingObserver

    overrides: dict[str, object] = {}
    if args.demo:
        overrides["model_dir"] = demo_model_dir()
    elif args.model_dir:
        overrides["model_dir"] = args.model_dir
    if args.auth_mode:
        overrides["auth_mode"] = args.auth_mode
    observer = LoggingObserver()
    try:
        settings = load_settings(**overrides)
        require_auth_mode_beyond_loopback(args.host, settings)
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
    app = build_app(
        service,
        settings,
        host=args.host,
        allow_hosts=args.allow_host,
        observer=observer,
        authenticator=authenticator,
    )
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
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        http=guarded_protocol(
            header_timeout=settings.header_timeout_seconds, max_connections=connections
        ),
        ws="none",  # no route takes a WebSocket; an upgrade would leave the guard behind
    )
    server = server_class()(
        config, front=app.state.front, grace_seconds=settings.shutdown_grace_seconds
    )
    try:
        server.run()  # on SIGTERM, uvicorn re-raises it once drained: the process ends by it
    except KeyboardInterrupt:  # uvicorn re-raises SIGINT too, as KeyboardInterrupt
        return 130
    return 0


def build_app(
    service: EmbeddingService,
    settings: Settings,
    *,
    host: str,
    allow_hosts: Sequence[str] = (),
    observer: RequestObserver | None = None,
    authenticator: Authenticator | None = None,
) -> Any:
    """The app `serve` runs: the one app, work off the event loop, JSON bodies only and, bound
    to loopback, loopback ``Host`` names (and ``allow_hosts``) only."""
    from .http.app import create_app
    from .http.front import LOOPBACK_HOSTS

    return create_app(
        service,
        settings,
        observer=observer,
        authenticator=authenticator,
        offload_inference=True,
        json_only=True,
        allowed_hosts=(
            LOOPBACK_HOSTS | {name.lower() for name in allow_hosts} if is_loopback(host) else None
        ),
    )


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


def require_auth_mode_beyond_loopback(host: str, settings: Settings) -> None:
    """Bound beyond loopback, `serve` never serves ``/v1`` to anyone by default: the auth
    mode must be stated (``--auth-mode`` or ``SIGLIP_AUTH_MODE``), ``none`` included."""
    if is_loopback(host) or "auth_mode" in settings.model_fields_set:
        return
    raise ConfigError(
        f"--host {host} is reachable beyond this machine and no auth mode is set: pass "
        f"--auth-mode api-key (with {ENV_PREFIX}API_KEY_SECRET_ARN), or --auth-mode none to "
        f"serve /v1 to anyone who can reach the port (or set {ENV_PREFIX}AUTH_MODE)"
    )
