"""The Lambda function around the one app: Powertools' logger and metrics, Mangum, SnapStart's
hooks, X-Ray, and `LambdaFunction.handler`, which answers every event and never raises.

Made by the assembly (`assembly.assemble_lambda`) before the init's end, so that its logger
reports a failed init; then `mount`-ed on the parts (docs/architecture.md, "The assembly").
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from mangum import Mangum
from mangum.types import LambdaContext as MangumContext

from ..engine.errors import InvalidInputError, SiglipError
from ..engine.json_value import JSONObject
from ..http.errors import error_answer
from ..http.observability import PowertoolsObserver
from ..http.unexpected import unexpected_error
from .events import as_mangum_reads, event_shape, proxy_response
from .sizing import MEMORY_SIZE_VARIABLE
from .snapstart import SnapStart, snap_start_init
from .types import Handler, LambdaContext, LambdaEvent, ProxyResponse

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

    from ..parts import Parts


def tracing_enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """X-Ray tracing unless ``POWERTOOLS_TRACE_DISABLED`` is true.

    Importing the X-Ray SDK is a measurable part of init (docs/performance.md gives the
    figure), so with tracing disabled the Tracer is never built.
    """
    disabled = environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower()
    return disabled not in ("1", "true")


class LambdaFunction:
    """One Lambda function: made with its logger and metrics when the init starts, then
    `mount`-ed on the assembly's parts; `handler` is the function's entry point."""

    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        self.environ = environ
        self.service_name = environ.get("POWERTOOLS_SERVICE_NAME", "siglip-text")
        self.logger = Logger(service=self.service_name)
        self.metrics = Metrics(
            namespace=environ.get("POWERTOOLS_METRICS_NAMESPACE", "SiglipText"),
            service=self.service_name,
        )
        # The package logger takes Powertools' handler and level; the package's own loggers,
        # those made later by the modules still to import included, propagate to it. It is
        # made here, so that it exists to be configured whatever has been imported so far.
        logging.getLogger("siglip_text")
        copy_config_to_registered_loggers(source_logger=self.logger, include={"siglip_text"})
        # /health publishes no metric; Powertools would warn about that on every call.
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        self.observer = PowertoolsObserver(self.metrics, self.logger)
        #: Set by `mount`: the parts, Mangum around the app, SnapStart's hooks, the tracer.
        self.parts: Parts | None = None
        self.asgi_handler: Handler | None = None
        self._mangum: Mangum | None = None
        self.snapstart: SnapStart | None = None
        self.tracer: Tracer | None = None
        self._traced: Handler = self._invoke
        # log_event=False even if POWERTOOLS_LOGGER_LOG_EVENT is set: events carry query text.
        in_context = self.logger.inject_lambda_context(
            correlation_id_path=correlation_paths.API_GATEWAY_REST, log_event=False
        )
        with_metrics = self.metrics.log_metrics(capture_cold_start_metric=True)
        self.handler: Handler = in_context(with_metrics(self._handle))

    @property
    def snap_start(self) -> bool:
        """This init will be snapshotted (SnapStart): no key is read before the snapshot."""
        return snap_start_init(self.environ)

    def init_failed(self) -> None:
        """Log the exception being handled: the init stopped, the function will not serve."""
        self.logger.exception("init failed: the function will not serve")

    def mount(self, parts: Parts, *, memory_warning: str | None = None) -> None:
        """Put the app behind Mangum, register SnapStart's hooks, trace if enabled; log the
        model loaded, and the memory check's warning (aws/sizing.py) with its figures."""
        service, settings = parts.service, parts.settings
        if memory_warning:
            need = parts.plan.manifest.memory
            self.logger.warning(
                memory_warning,
                extra={
                    "function_memory_mb": self.environ.get(MEMORY_SIZE_VARIABLE),
                    "recommended_mb": need.recommended_mb if need else None,
                },
            )
        self.logger.info(
            "model loaded",
            extra={
                "model": service.model_id,
                "revision": service.revision,
                "dimension": service.dimension,
                "fingerprint": service.fingerprint,
                "intra_op_threads": service.intra_op_threads,
                "init": service.init_timings.as_dict(),
                "runtime": service.describe()["runtime"],
                "auth_mode": settings.auth_mode,
            },
        )
        self.parts = parts
        # A custom domain's API mapping leaves its base path in the event's path: Mangum
        # strips it.
        self._mangum = Mangum(
            parts.app, lifespan="off", api_gateway_base_path=settings.api_base_path or "/"
        )
        self.asgi_handler = self._through_mangum
        if self.snap_start:
            self.snapstart = SnapStart(
                parts, asgi_handler=self.asgi_handler, logger=self.logger, metrics=self.metrics
            )
            self.snapstart.register()
        if tracing_enabled(self.environ):
            from aws_lambda_powertools import Tracer

            self.tracer = Tracer(service=self.service_name)
            # Never capture responses (they hold vectors) nor errors (they could hold input).
            self._traced = self.tracer.capture_lambda_handler(
                capture_response=False, capture_error=False
            )(self._invoke)

    def _handle(self, event: LambdaEvent, context: LambdaContext) -> ProxyResponse:
        """API Gateway (REST v1 or HTTP API v2) or function URL event -> the app, through
        Mangum. Never raises: an event Mangum cannot read is a 400 before any work
        (events.as_mangum_reads), anything unexpected an OpenAI 500 that says nothing of it."""
        if self.snapstart is not None and self.snapstart.refusal is not None:
            return self.snapstart.refused()
        try:
            readable = as_mangum_reads(event)
            self._mangum_reads(readable, context)
        except SiglipError as refused:
            return proxy_response(error_answer(refused))
        except Exception as exc:  # a fault in the check itself: still a proxy response
            return proxy_response(error_answer(unexpected_error(exc, self.logger)))
        try:
            return self._traced(readable, context)
        except Exception as exc:
            return proxy_response(error_answer(unexpected_error(exc, self.logger)))

    def _mangum_reads(self, event: JSONObject, context: LambdaContext) -> None:
        """Mangum's own reading of the request (its ASGI scope: no body, no app), or a 400
        naming the event's shape: what the field checks of events.py missed never makes
        Mangum raise inside the handler (a 500)."""
        if self._mangum is None:
            return
        try:
            _ = self._mangum.infer(dict(event), cast(MangumContext, context)).scope
        except Exception as exc:
            raise InvalidInputError(
                f"the Lambda event ({event_shape(event)}) cannot be read as a request: "
                f"{type(exc).__name__} reading its fields"
            ) from None

    def _invoke(self, event: LambdaEvent, context: LambdaContext) -> ProxyResponse:
        if self.asgi_handler is None:
            raise RuntimeError("LambdaFunction.handler before mount()")
        return self.asgi_handler(event, context)

    def _through_mangum(self, event: LambdaEvent, context: LambdaContext) -> ProxyResponse:
        """The event through Mangum and the app."""
        assert self._mangum is not None
        # Mangum's context Protocol also names the mobile SDK's fields, which it never reads;
        # its answer is a plain dict in the proxy response's shape.
        return cast("ProxyResponse", self._mangum(dict(event), cast(MangumContext, context)))
