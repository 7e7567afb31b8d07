"""One assembly: the running parts (service, authenticator, app) from the settings and the
platform, in one place; each entry point calls it and keeps only its platform's concerns.

`assemble` is the whole walk, the same for Lambda and `serve`:

1. the auth-mode rule (`require_auth_mode`): ``/v1`` is never open to anyone by default;
2. the init starts (engine/loading.py, stages 1 to 3): the manifest read, the files checked,
   the ONNX Runtime session building in a worker thread;
3. meanwhile the web stack imports (FastAPI; for Lambda, Powertools and Mangum first, in
   `lambda_function`), so that the session builds while they do;
4. the init finishes (stages 4 to 6: tokenizer, the session, the service, this CPU's
   arithmetic, the contract) or raises what stopped it;
5. the authenticator (auth mode ``api-key``), then the app (`http.app.create_app`, called
   from here only) with the platform's options.

`lambda_function` is the same walk with Lambda's parts around it (aws/function.py): the init
starts first, from the function that reads the settings (their error is held like any
other), then Powertools and Mangum import, so the logger exists to report a failed init;
the auth-mode rule follows; Mangum's adapter, SnapStart's hooks and X-Ray come last.
"""

from __future__ import annotations

import enum
import ipaddress
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .engine.config import ENV_PREFIX, Settings
from .engine.errors import ConfigError
from .engine.loading import InitPlan, ServiceInit

if TYPE_CHECKING:
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
class Parts:
    """The running parts one assembly returns."""

    settings: Settings
    plan: InitPlan
    service: EmbeddingService
    authenticator: Authenticator | None
    observer: Observer | None
    app: Any


def assemble(
    settings: Settings,
    platform: Platform,
    *,
    observer: Observer | None = None,
    host: str = "127.0.0.1",
    allow_hosts: Sequence[str] = (),
    init: ServiceInit | None = None,
    read_keys_now: bool = True,
) -> Parts:
    """The service, the authenticator and the app, for ``platform``; raises what stopped the
    init (ConfigError, ModelLoadError). ``host`` and ``allow_hosts`` are `serve`'s bind
    address and extra ``Host`` names; ``init`` an init the caller started earlier (Lambda:
    before its own imports); ``read_keys_now=False`` an init to be snapshotted (SnapStart:
    no key is read before the snapshot)."""
    require_auth_mode(settings, platform, host=host)
    if init is None:
        init = ServiceInit.start(settings)
    # FastAPI and the routes import now, while the session builds (build_app uses them).
    from .http import app as _routes  # noqa: F401

    service = init.service()
    assert init.plan is not None  # an init that served has its plan
    authenticator = build_authenticator(
        settings, platform, observer=observer, read_now=read_keys_now
    )
    app = build_app(
        service,
        settings,
        platform,
        observer=observer,
        authenticator=authenticator,
        host=host,
        allow_hosts=allow_hosts,
    )
    return Parts(settings, init.plan, service, authenticator, observer, app)


def build_app(
    service: EmbeddingService,
    settings: Settings,
    platform: Platform,
    *,
    observer: Observer | None = None,
    authenticator: Authenticator | None = None,
    host: str = "127.0.0.1",
    allow_hosts: Sequence[str] = (),
) -> Any:
    """The one app around a loaded service, with the platform's options: on Lambda the work
    stays on the event loop (one request per environment: a thread hop gains nothing) and
    responses are bounded by Lambda's 6 MB; `serve` runs the work off the event loop, takes
    JSON bodies only and, bound to loopback, loopback ``Host`` names (and ``allow_hosts``)."""
    from .http.app import create_app

    if platform is Platform.LAMBDA:
        from .http.response_size import LAMBDA_RESPONSE_LIMIT_BYTES

        return create_app(
            service,
            settings,
            observer=observer,
            authenticator=authenticator,
            offload_inference=False,
            frontend_response_limit=LAMBDA_RESPONSE_LIMIT_BYTES,
        )
    return create_app(
        service,
        settings,
        observer=observer,
        authenticator=authenticator,
        offload_inference=True,
        json_only=True,
        allowed_hosts=serve_allowed_hosts(host, allow_hosts),
    )


def lambda_function(
    settings: Settings | Callable[[], Settings], environ: Mapping[str, str] = os.environ
) -> LambdaFunction:
    """The Lambda function, assembled: `assemble` with Lambda's parts around it. ``settings``
    may be the function that reads them (`config.get_settings`), so that invalid settings are
    logged and raised like any other init error."""
    init = ServiceInit.start(settings)
    # Powertools and Mangum import while the session builds.
    from .aws.function import LambdaFunction

    function = LambdaFunction(environ)
    try:
        if init.error is not None:  # stopped before its session build: raised first
            raise init.error
        assert init.settings is not None  # an init without an error has read its settings
        function.warn_about_memory(init)
        parts = assemble(
            init.settings,
            Platform.LAMBDA,
            observer=function.observer,
            init=init,
            read_keys_now=not function.snap_start,
        )
    except Exception:
        function.init_failed()
        raise
    function.serve(parts.app, parts.settings, parts.plan)
    return function


def require_auth_mode(settings: Settings, platform: Platform, *, host: str) -> None:
    """``/v1`` is never served to anyone by default: the auth mode must be stated
    (``SIGLIP_AUTH_MODE``, or serve's ``--auth-mode``), ``none`` included; by the Lambda
    function always (the template always sets it), by `serve` when bound beyond loopback."""
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


def build_authenticator(
    settings: Settings,
    platform: Platform,
    *,
    observer: Observer | None,
    read_now: bool = True,
) -> Authenticator | None:
    """The key check of auth mode ``api-key`` (None otherwise), its keys read: `serve` reads
    the secret in a thread of its own (no request waits for a read), the Lambda function in
    the request (one at a time); ``read_now=False`` checks the secret without reading it."""
    if settings.auth_mode != "api-key":
        return None
    if settings.api_key_file is not None and platform is Platform.LAMBDA:
        # The image is the only file a function has, and a key baked into it is a key in
        # every copy of the image: Lambda's keys live in Secrets Manager.
        raise ConfigError(
            f"{ENV_PREFIX}API_KEY_FILE is for siglip-text serve: the Lambda function reads "
            f"its keys from Secrets Manager ({ENV_PREFIX}API_KEY_SECRET_ARN; the template's "
            "AuthMode=api-key creates the secret)"
        )
    from .http.auth import build_authenticator

    return build_authenticator(
        settings,
        background=platform is Platform.SERVE,
        on_refresh_failed=observer.key_refresh_failed if observer is not None else None,
        read_now=read_now,
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
