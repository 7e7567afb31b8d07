"""One assembly: the running parts (service, authenticator, front, app) from the settings and
the platform, in one place; each entry point calls it once and mounts what it is given.

`assemble` builds `serve`'s parts, `assemble_lambda` the Lambda function around its parts;
docs/architecture.md, "The assembly", walks both.
"""

from __future__ import annotations

import enum
import ipaddress
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from .aws.sizing import check_function_memory, lambda_cpus, processes_per_environment
from .engine.errors import ConfigError
from .engine.loading import ServiceInit
from .parts import Parts
from .settings import ENV_PREFIX, Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

    from .aws.function import LambdaFunction
    from .engine.service import EmbeddingService
    from .http.app import Authenticator
    from .http.observability import LoggingObserver, PowertoolsObserver

    #: The observers of the two platforms: requests, and the key secret's failed reads.
    Observer = LoggingObserver | PowertoolsObserver


class Platform(enum.Enum):
    """Where the app runs: the assembly is the same, the app's options differ."""

    #: One request per execution environment, behind API Gateway or a function URL.
    LAMBDA = "lambda"
    #: `siglip-text serve`: uvicorn, many connections, bound to a host.
    SERVE = "serve"


@dataclass(frozen=True)
class AppOptions:
    """The app's options on one platform (`app_options`)."""

    #: Each request's work in a worker thread, so the event loop keeps answering meanwhile.
    offload_inference: bool
    #: The largest answer the platform in front relays (None: no limit).
    frontend_response_limit: int | None = None
    #: The front takes JSON bodies only.
    json_only: bool = False


def app_options(platform: Platform) -> AppOptions:
    """On Lambda one request per environment: the work stays on the event loop (a thread hop
    gains nothing) and answers are bounded by Lambda's 6 MB. `serve` runs the work off the
    event loop and takes JSON bodies only (and, bound to loopback, loopback ``Host`` names:
    `serve_allowed_hosts`)."""
    if platform is Platform.LAMBDA:
        from .http.response_size import LAMBDA_RESPONSE_LIMIT_BYTES

        return AppOptions(
            offload_inference=False, frontend_response_limit=LAMBDA_RESPONSE_LIMIT_BYTES
        )
    return AppOptions(offload_inference=True, json_only=True)


def assemble(
    settings: Settings,
    *,
    observer: Observer | None = None,
    host: str = "127.0.0.1",
    allow_hosts: Sequence[str] = (),
) -> Parts:
    """`serve`'s parts, bound to ``host`` (and answering ``allow_hosts`` too); raises what
    stopped the init (ConfigError, ModelLoadError)."""
    require_auth_mode(settings, Platform.SERVE, host=host)
    options = app_options(Platform.SERVE)
    began = time.perf_counter()
    init = ServiceInit.start(settings.init_plan(), began=began)
    # FastAPI and the routes import now, while the session builds.
    from .http.app import build_front, create_app
    from .http.auth import build_authenticator

    service = init.service()
    assert init.plan is not None  # an init that served has its plan
    authenticator = (
        build_authenticator(
            settings,
            background=True,  # no request waits for a read: a thread of its own reads
            on_refresh_failed=observer.key_refresh_failed if observer is not None else None,
        )
        if settings.auth_mode == "api-key"
        else None
    )
    front = build_front(
        settings,
        authenticator=authenticator,
        observer=observer,
        json_only=options.json_only,
        allowed_hosts=serve_allowed_hosts(host, allow_hosts),
    )
    app = create_app(
        service,
        settings,
        observer=observer,
        offload_inference=options.offload_inference,
        frontend_response_limit=options.frontend_response_limit,
        front=front,
    )
    return Parts(settings, init.plan, service, authenticator, front, app)


def assemble_lambda(
    settings: Settings | Callable[[], Settings], environ: Mapping[str, str] = os.environ
) -> LambdaFunction:
    """The Lambda function around its parts. ``settings`` may be the function that reads
    them (`settings.get_settings`), so that invalid settings are logged and raised like any
    other init error: every error before Powertools' logger exists is held until it does.

    The order is the init's: the plan and Lambda's memory check, the session building in a
    worker thread; meanwhile Powertools, Mangum and FastAPI import; then the service, the key
    check (read after each restore instead under SnapStart), the front and the app."""
    options = app_options(Platform.LAMBDA)
    began = time.perf_counter()
    memory_warning: str | None = None
    try:
        if not isinstance(settings, Settings):
            settings = settings()
        require_auth_mode(settings, Platform.LAMBDA, host="")
        plan = settings.init_plan(cpus=partial(lambda_cpus, environ))
        memory_warning = check_function_memory(
            plan.manifest, environ, processes=processes_per_environment(environ) or 1
        )
        init = ServiceInit.start(plan, began=began)
    except Exception as exc:
        init = ServiceInit.failed(exc)
    # Powertools, Mangum and FastAPI import while the session builds.
    from .aws.function import LambdaFunction
    from .http.app import build_front, create_app
    from .http.auth import build_authenticator

    function = LambdaFunction(environ)
    try:
        if init.error is not None:  # stopped before its session build: raised first
            raise init.error
        assert isinstance(settings, Settings) and init.plan is not None
        service = init.service()
        authenticator = (
            build_authenticator(
                settings,
                on_refresh_failed=function.observer.key_refresh_failed,
                read_now=not function.snap_start,  # a snapshot never holds a key
            )
            if settings.auth_mode == "api-key"
            else None
        )
        front = build_front(
            settings,
            authenticator=authenticator,
            observer=function.observer,
            json_only=options.json_only,
        )
        app = create_app(
            service,
            settings,
            observer=function.observer,
            offload_inference=options.offload_inference,
            frontend_response_limit=options.frontend_response_limit,
            front=front,
        )
    except Exception:
        function.init_failed()
        raise
    function.mount(
        Parts(settings, init.plan, service, authenticator, front, app),
        memory_warning=memory_warning,
    )
    return function


def build_app(
    service: EmbeddingService,
    settings: Settings,
    platform: Platform,
    *,
    authenticator: Authenticator | None = None,
    host: str = "127.0.0.1",
    allow_hosts: Sequence[str] = (),
) -> FastAPI:
    """An app around a loaded service with the options `assemble` and `assemble_lambda` give
    their platform (tests build apps this way)."""
    from .http.app import create_app

    options = app_options(platform)
    return create_app(
        service,
        settings,
        authenticator=authenticator,
        offload_inference=options.offload_inference,
        frontend_response_limit=options.frontend_response_limit,
        json_only=options.json_only,
        allowed_hosts=(
            serve_allowed_hosts(host, allow_hosts) if platform is Platform.SERVE else None
        ),
    )


def require_auth_mode(settings: Settings, platform: Platform, *, host: str) -> None:
    """``/v1`` is never served to anyone by default: the auth mode must be stated
    (``SIGLIP_AUTH_MODE``, or serve's ``--auth-mode``), ``none`` included; by the Lambda
    function always (the template always sets it), by `serve` when bound beyond loopback.
    A key file is `serve`'s: the Lambda function reads its keys from Secrets Manager."""
    if settings.api_key_file is not None and platform is Platform.LAMBDA:
        # The image is the only file a function has, and a key baked into it is a key in
        # every copy of the image: Lambda's keys live in Secrets Manager.
        raise ConfigError(
            f"{ENV_PREFIX}API_KEY_FILE is for siglip-text serve: the Lambda function reads "
            f"its keys from Secrets Manager ({ENV_PREFIX}API_KEY_SECRET_ARN; the template's "
            "AuthMode=api-key creates the secret)"
        )
    if "auth_mode" in settings.model_fields_set:
        return
    if platform is Platform.LAMBDA:
        raise ConfigError(
            f"{ENV_PREFIX}AUTH_MODE is not set: the function does not start without an "
            "explicit auth mode (api-key, or none behind IAM or your own network controls)"
        )
    if not is_loopback(host):
        raise ConfigError(
            f"--host {host} is reachable beyond this machine and no auth mode is set: pass "
            f"--api-key-file PATH (keys one per line, chmod 600), --auth-mode api-key with "
            f"{ENV_PREFIX}API_KEY_SECRET_ARN, or --auth-mode none "
            f"to serve /v1 to anyone who can reach the port (or set {ENV_PREFIX}AUTH_MODE)"
        )


def serve_allowed_hosts(host: str, allow_hosts: Sequence[str]) -> frozenset[str] | None:
    """Bound to loopback, the ``Host`` names `serve` answers: loopback names and
    ``allow_hosts``; beyond loopback None (no check: a server bound to a network address is
    reached under names this one cannot know)."""
    if not is_loopback(host):
        return None
    from .http.front import LOOPBACK_HOSTS

    return LOOPBACK_HOSTS | {name.lower() for name in allow_hosts}


def is_loopback(host: str) -> bool:
    """Whether a bind address is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
