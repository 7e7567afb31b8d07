"""`siglip-text serve`: the app under uvicorn, with its connections guarded (a header
deadline, a header size bound, a connection cap: `http.connections`), and the shutdown grace
period on SIGTERM. The parts come from the one assembly (`assembly.assemble`), which holds
the start rule (beyond loopback, only with an auth mode stated); docs/architecture.md.

It exits as uvicorn and Python do on a signal, by the signal itself: status 143 (128 +
SIGTERM) for SIGTERM, 130 for SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import sys

from .engine.errors import SiglipError
from .http.connections import (
    RESERVED_DESCRIPTORS,
    descriptors_for,
    guarded_protocol,
    server_class,
)
from .settings import demo_model_dir, load_settings

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
    parser.add_argument(
        "--api-key-file",
        metavar="PATH",
        help="auth mode api-key with the keys in PATH, one per line (blank lines and # "
        "comments ignored), mode 600; changes are picked up without a restart; else "
        "SIGLIP_API_KEY_FILE (docs/api.md, API keys)",
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
    from .assembly import assemble
    from .http.observability import LoggingObserver

    overrides: dict[str, object] = {}
    if args.demo:
        overrides["model_dir"] = demo_model_dir()
    elif args.model_dir:
        overrides["model_dir"] = args.model_dir
    if args.auth_mode:
        overrides["auth_mode"] = args.auth_mode
    if args.api_key_file:
        overrides["api_key_file"] = args.api_key_file
    try:
        settings = load_settings(**overrides)
        parts = assemble(
            settings,
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
    server = server_class()(
        config, front=parts.front, grace_seconds=settings.shutdown_grace_seconds
    )
    try:
        server.run()  # on SIGTERM, uvicorn re-raises it once drained: the process ends by it
    except KeyboardInterrupt:  # uvicorn re-raises SIGINT too, as KeyboardInterrupt
        return 130
    return 0
