"""AWS Lambda entry point: ``siglip_text.lambda_function.handler``.

Everything is built at import time, i.e. in Lambda's init phase: settings, manifest,
tokenizer, ONNX session and an inference probe. Any failure raises, so the init phase fails
closed and no request is ever served by a broken artifact. Mangum runs with
``lifespan="off"``: it would otherwise enter the ASGI lifespan on every invocation.
"""

from __future__ import annotations

import gc

# The init allocates hundreds of thousands of long-lived objects (pydantic's schemas for
# FastAPI's models, the modules); the cyclic collector would walk them again and again while
# they are made, and again on every later full collection. So it pauses for the init, and
# what the init made is frozen (gc.freeze: never scanned again) when it resumes.
gc.disable()

# The imports below run in this order on purpose (pyproject.toml lets this module import
# after code): the service's init starts before the web stack is imported, so the ONNX
# Runtime session builds in its thread (GIL released) while FastAPI, Mangum and Powertools
# import. Its error, if any, is raised by `_init.service()` once the logger exists.
import os
import warnings
from typing import TYPE_CHECKING, Any

from .engine.config import ENV_PREFIX, MEMORY_SIZE_VARIABLE, Settings, get_settings
from .engine.errors import ConfigError
from .engine.loading import ServiceInit

if TYPE_CHECKING:
    from .aws.snapstart import SnapStart


def _resume_collection(*, freeze: bool) -> None:
    """End the init's pause of the cyclic collector (frozen: what the init made stays)."""
    if freeze:
        gc.freeze()
    gc.enable()


_init = ServiceInit.start(get_settings)

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from mangum import Mangum

from .http.app import create_app
from .http.observability import PowertoolsObserver
from .http.response_size import LAMBDA_RESPONSE_LIMIT_BYTES

SERVICE_NAME = os.environ.get("POWERTOOLS_SERVICE_NAME", "siglip-text")
METRICS_NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "SiglipText")

logger = Logger(service=SERVICE_NAME)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE_NAME)
copy_config_to_registered_loggers(source_logger=logger, include={"siglip_text"})
# /health publishes no metric; Powertools would warn about that on every call.
warnings.filterwarnings("ignore", message="No application metrics to publish")


def require_explicit_auth_mode(settings: Settings) -> None:
    """The function never serves ``/v1`` to anyone by default: SIGLIP_AUTH_MODE must be set
    (the template always sets it), ``none`` included."""
    if "auth_mode" not in settings.model_fields_set:
        raise ConfigError(
            f"{ENV_PREFIX}AUTH_MODE is not set: the function does not start without an "
            "explicit auth mode (api-key, or none behind IAM or your own network controls)"
        )


def _build_app() -> Any:
    observer = PowertoolsObserver(metrics, logger)
    try:
        if _init.error is not None:  # stopped before its session build: raised first
            raise _init.error
        settings = get_settings()
        if _init.memory_warning and _init.manifest is not None:
            logger.warning(
                _init.memory_warning,
                extra={
                    "function_memory_mb": os.environ.get(MEMORY_SIZE_VARIABLE),
                    "recommended_mb": _init.manifest.memory.recommended_mb
                    if _init.manifest.memory
                    else None,
                },
            )
        require_explicit_auth_mode(settings)
        service = _init.service()
        authenticator = None
        if settings.auth_mode == "api-key":
            from .aws.snapstart import snap_start_init
            from .http.auth import build_authenticator

            # A snapshot must hold no key: under SnapStart the keys are read after a restore.
            authenticator = build_authenticator(
                settings,
                on_refresh_failed=observer.key_refresh_failed,
                read_now=not snap_start_init(),
            )
    except Exception:
        _resume_collection(freeze=False)
        logger.exception("init failed: the function will not serve")
        raise
    logger.info(
        "model loaded",
        extra={
            "model": service.model_id,
            "revision": service.revision,
            "dimension": service.dimension,
            "fingerprint": service.fingerprint,
            "intra_op_threads": settings.intra_op_threads(),
            "init": service.init_timings.as_dict(),
            "runtime": service.describe()["runtime"],
            "auth_mode": settings.auth_mode,
        },
    )
    return create_app(
        service,
        settings,
        observer=observer,
        authenticator=authenticator,
        offload_inference=False,  # one request per environment: no thread hop needed
        frontend_response_limit=LAMBDA_RESPONSE_LIMIT_BYTES,
    )


app = _build_app()
# A custom domain's API mapping leaves its base path in the event's path: Mangum strips it.
asgi_handler = Mangum(
    app, lifespan="off", api_gateway_base_path=get_settings().api_base_path or "/"
)


def _register_snapstart() -> SnapStart | None:
    """Under SnapStart (``AWS_LAMBDA_INITIALIZATION_TYPE=snap-start``), the hooks that drop
    the secrets before the snapshot and check the restoring host after it (snapstart.py)."""
    from .aws.snapstart import SnapStart, snap_start_init

    if not snap_start_init():
        return None
    hooks = SnapStart(
        service=app.state.service,
        settings=get_settings(),
        asgi_handler=asgi_handler,
        authenticator=app.state.authenticator,
        logger=logger,
        metrics=metrics,
    )
    hooks.register()
    return hooks


snapstart = _register_snapstart()


def tracing_enabled() -> bool:
    """X-Ray tracing unless ``POWERTOOLS_TRACE_DISABLED`` is true.

    Importing the X-Ray SDK is a measurable part of init (docs/performance.md gives the
    figure), so with tracing disabled the Tracer is never built.
    """
    return os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower() not in ("1", "true")


def _invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return asgi_handler(event, context)


if tracing_enabled():
    from aws_lambda_powertools import Tracer

    tracer = Tracer(service=SERVICE_NAME)
    # Never capture responses (they hold vectors) nor errors (they could hold input).
    _invoke = tracer.capture_lambda_handler(capture_response=False, capture_error=False)(_invoke)


# log_event=False even if POWERTOOLS_LOGGER_LOG_EVENT is set: events carry query text.
@logger.inject_lambda_context(
    correlation_id_path=correlation_paths.API_GATEWAY_REST, log_event=False
)
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """API Gateway (REST v1 or HTTP API v2) event -> FastAPI through Mangum."""
    if snapstart is not None and snapstart.refusal is not None:
        return snapstart.refused()
    return _invoke(event, context)


_resume_collection(freeze=True)
