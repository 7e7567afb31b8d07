"""`siglip-text serve`: the same app under uvicorn, with bounded admission."""

from __future__ import annotations

import argparse
import logging
import sys

from .config import demo_model_dir, load_settings
from .errors import SiglipError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--demo", action="store_true", help="serve the bundled demo model (random weights)"
    )
    source.add_argument("--model-dir", help="artifact directory (else SIGLIP_* variables)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])


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
    from .api import create_app
    from .loading import load_service
    from .observability import LoggingObserver

    overrides: dict[str, object] = {}
    if args.demo:
        overrides["model_dir"] = demo_model_dir()
    elif args.model_dir:
        overrides["model_dir"] = args.model_dir
    try:
        settings = load_settings(**overrides)
        service = load_service(settings)
        authenticator = None
        if settings.auth_mode == "api-key":
            from .auth import build_authenticator

            authenticator = build_authenticator(settings)
    except SiglipError as exc:
        print(f"siglip-text serve: cannot start: {exc.message}", file=sys.stderr)
        return 1
    app = create_app(service, settings, observer=LoggingObserver(), authenticator=authenticator)
    logging.getLogger("siglip_text").info(
        "serving %s (revision %s, dimension %d) on http://%s:%d/v1",
        service.model_id,
        service.revision,
        service.dimension,
        args.host,
        args.port,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0
