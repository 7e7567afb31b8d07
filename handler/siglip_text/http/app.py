"""The HTTP surface: the routes (module level, one table), their error handlers (the only
ones), and ``create_app(service, settings)``, with `front.Front` before the routes.

The only module that imports FastAPI; what an app's routes serve is one object,
``app.state.served``. docs/architecture.md walks a request through it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..engine.errors import InvalidInputError, SiglipError
from ..engine.json_value import JSONObject
from ..engine.limits import Deadline
from ..engine.self_check import expected_probe
from ..engine.service import PROBE_TEXT, EmbeddingService
from ..settings import Settings
from .admission import Admission
from .asgi import Scope
from .embeddings import embed_body
from .errors import error_answer, short
from .front import Front
from .gate import API_PREFIX, method_not_allowed, route_not_found
from .inputs_bound import InputsBound, derive_inputs_bound
from .schemas import (
    ErrorResponse,
    OpenAICompatEmbeddingRequest,
    OpenAICompatEmbeddingResponse,
    TokenizeRequest,
)
from .tokenize import tokenize_body

logger = logging.getLogger("siglip_text.http.app")

_T = TypeVar("_T")


class RequestObserver(Protocol):
    """Receives what each request did (metrics, logs); never the query text."""

    def embeddings_served(
        self, *, inputs: int, tokens: int, latency_ms: float, cache_hits: int, truncated: int
    ) -> None: ...

    def request_failed(self, *, status: int, code: str | None) -> None: ...


#: Checks the ``Authorization`` header value; raises AuthenticationError when it is wrong.
Authenticator = Callable[[str | None], None]


class Runner(Protocol):
    """Runs a request's work: in a worker thread (`serve`) or on the loop (Lambda)."""

    def __call__(self, work: Callable[[], _T], /) -> Awaitable[_T]: ...


async def _on_the_loop(work: Callable[[], _T]) -> _T:
    return work()


@dataclass(frozen=True)
class Served:
    """What the routes of one app serve, and how (``app.state.served``)."""

    service: EmbeddingService
    settings: Settings
    observer: RequestObserver | None = None
    #: The largest answer the frontend returns (None: no limit).
    response_limit: int | None = None
    #: The most inputs a request may hold (inputs_bound.py); None: the setting's number, or
    #: OpenAI's 2048 where it is "auto" (`Served.max_inputs` gives it).
    bound: InputsBound | None = None
    run: Runner = field(default=run_in_threadpool)

    @property
    def max_inputs(self) -> InputsBound:
        """The bound `create_app` derived, else the one of a frontend without limits."""
        if self.bound is not None:
            return self.bound
        return derive_inputs_bound(self.service, self.settings, response_limit=None)


def served(request: Request) -> Served:
    found: Served = request.app.state.served
    return found


# --- the routes ------------------------------------------------------------------------------


async def health(request: Request, probe: bool = False) -> JSONObject:
    """Open to anyone (probes): the model's identity, and ``max_inputs_per_request``, the
    most inputs a request may hold (a client's batch size). Versions, threads and init
    timings are in the init log; cache counters in the metrics (CacheHits). ``?probe=true``
    adds what the pre-traffic hook (a function without this package) holds this version's /v1
    answer to: the init's probe text, and the reference export recorded for it with its
    bound."""
    service = served(request).service
    body: JSONObject = {
        "status": "ok",
        "model": service.model_id,
        "revision": service.revision,
        "embedding_dimension": service.dimension,
        "fingerprint": service.fingerprint,
        "max_inputs_per_request": served(request).max_inputs.value,
    }
    if probe:
        body["probe"] = expected_probe(service.manifest, PROBE_TEXT)
    return body


async def list_models(request: Request) -> JSONObject:
    context = served(request)
    service = context.service
    return {
        "object": "list",
        "data": [
            {
                "id": service.model_id,
                "object": "model",
                "created": 0,
                "owned_by": "siglip-text",
                "fingerprint": service.fingerprint,
                "max_inputs_per_request": context.max_inputs.value,
            }
        ],
    }


async def create_embeddings(request: Request) -> Response:
    """Parse, validate, fit and embed, in the running slot the front admitted this request to,
    on the body the front read (bounded)."""
    started = time.perf_counter()
    context = served(request)
    body = await request.body()
    deadline = invocation_deadline(request.scope, context.settings)
    content, inputs, result = await context.run(
        partial(
            embed_body,
            context.service,
            context.settings,
            body,
            deadline=deadline,
            response_limit=context.response_limit,
            bound=context.max_inputs,
        )
    )
    if context.observer is not None:
        context.observer.embeddings_served(
            inputs=inputs,
            tokens=result.prompt_tokens,
            latency_ms=(time.perf_counter() - started) * 1000.0,
            cache_hits=result.cache_hits,
            truncated=result.truncated,
        )
    return Response(content, media_type="application/json")


async def tokenize(request: Request) -> Response:
    """``POST /tokenize`` (tokenize.py), in the running slot the front admitted it to."""
    context = served(request)
    body = await request.body()
    content = await context.run(
        partial(
            tokenize_body,
            context.service,
            body,
            max_inputs=context.max_inputs.value,
            response_limit=context.response_limit,
        )
    )
    return Response(content, media_type="application/json")


@dataclass(frozen=True)
class Route:
    """One route: its method, path and endpoint; ``takes_body``: the front reads a body for
    it (every other route has its body refused unread); ``options`` go to FastAPI."""

    method: str
    path: str
    endpoint: Callable[..., Awaitable[JSONObject | Response]]
    takes_body: bool = False
    # Any: the keywords of FastAPI's add_api_route, each of its own type
    options: Mapping[str, Any] = field(default_factory=dict)


#: Every route of the API, in the order the 404 message lists them.
ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/v1/embeddings",
        create_embeddings,
        takes_body=True,
        options={
            "summary": "Create embeddings (OpenAI-compatible)",
            "response_model": OpenAICompatEmbeddingResponse,
            "responses": {
                code: {"model": ErrorResponse} for code in (400, 401, 404, 405, 413, 429, 500)
            },
            "openapi_extra": {
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": OpenAICompatEmbeddingRequest.model_json_schema()
                        }
                    },
                }
            },
        },
    ),
    Route(
        "GET",
        "/v1/models",
        list_models,
        options={"summary": "The one served model (OpenAI list-models shape)"},
    ),
    Route(
        "POST",
        "/tokenize",
        tokenize,
        takes_body=True,
        options={
            "summary": "The tokens the model is fed (text-embeddings-inference's /tokenize)",
            "responses": {code: {"model": ErrorResponse} for code in (400, 401, 413, 429)},
            "openapi_extra": {
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": TokenizeRequest.model_json_schema()}
                    },
                }
            },
        },
    ),
    Route(
        "GET", "/health", health, options={"summary": "Liveness and the served model's identity"}
    ),
)
OPENAPI_PATH = "/openapi.json"


def route_table() -> tuple[tuple[str, str], ...]:
    """(method, path) of every route, the OpenAPI schema's included; each ``GET`` also
    answers ``HEAD`` (RFC 9110 section 9.1: general-purpose servers support both)."""
    table = [*((r.method, r.path) for r in ROUTES), ("GET", OPENAPI_PATH)]
    return tuple(pair for method, path in table for pair in _with_head(method, path))


def _with_head(method: str, path: str) -> tuple[tuple[str, str], ...]:
    return ((method, path), ("HEAD", path)) if method == "GET" else ((method, path),)


# --- the error handlers: the only ones -------------------------------------------------------


def error_response(request: Request, exc: SiglipError) -> Response:
    """The OpenAI-shaped answer to an error; a 5xx's cause is logged for the operator (never
    query text: the engine's messages name checks, not inputs)."""
    answer = error_answer(exc)
    if answer.status >= 500:
        logger.error(
            "answered %d (%s): %s",
            answer.status,
            exc.code,
            exc.message,
            extra={"status": answer.status, "code": exc.code, "cause": exc.message},
        )
    observer = served(request).observer
    if observer is not None:
        observer.request_failed(status=answer.status, code=exc.code)
    return Response(
        answer.body,
        status_code=answer.status,
        headers=answer.headers,
        media_type="application/json",
    )


async def _on_siglip_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SiglipError)
    return error_response(request, exc)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    """Starlette's routing errors (404, 405) in OpenAI's shape, naming the fix."""
    assert isinstance(exc, StarletteHTTPException)
    method, path = request.method, str(request.scope.get("path", ""))
    error: SiglipError
    if exc.status_code == 404:
        error = route_not_found(method, path, route_table())
    elif exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        error = method_not_allowed(method, path, [m.strip() for m in allowed.split(",")])
    else:
        error = InvalidInputError(short(str(exc.detail), 200))
    return error_response(request, error)


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    # The endpoints read their own bodies; FastAPI's 422 `detail` never reaches a client.
    return error_response(request, InvalidInputError("the request is not valid"))


EXCEPTION_HANDLERS: dict[
    # Any: Starlette's own type for an exception handler's arguments and coroutine
    int | type[Exception], Callable[[Request, Any], Coroutine[Any, Any, Response]]
] = {
    SiglipError: _on_siglip_error,
    StarletteHTTPException: _on_http_error,
    RequestValidationError: _on_validation_error,
}


# --- the app ---------------------------------------------------------------------------------


def create_app(
    service: EmbeddingService,
    settings: Settings | None = None,
    *,
    observer: RequestObserver | None = None,
    authenticator: Authenticator | None = None,
    offload_inference: bool = True,
    frontend_response_limit: int | None = None,
    json_only: bool = False,
    allowed_hosts: frozenset[str] | None = None,
    front: Front | None = None,
) -> FastAPI:
    """The app around a loaded service, its `front.Front` in front of the routes.

    ``offload_inference`` runs each request's work (parsing, tokenization, the model,
    serialization) in a worker thread, so that the event loop keeps answering (and refusing
    with 429) meanwhile (`serve`); Lambda serves one request per environment at a time and
    turns it off: there the thread hop is a cost with nothing to gain (docs/performance.md).
    ``frontend_response_limit`` is the response size the platform in front allows (Lambda's
    6 MB), used when ``SIGLIP_MAX_RESPONSE_BYTES`` is unset; None: no limit (`serve`).
    ``json_only`` and ``allowed_hosts`` are the front's checks for `serve` (see front.py);
    ``front`` a front already built (`build_front`: the assembly keeps it for `serve`), which
    then stands for ``authenticator``, ``json_only`` and ``allowed_hosts``.
    """
    settings = settings or Settings()
    app = FastAPI(
        title="siglip-text",
        # The API's version, not the package's: /openapi.json is open to anyone (client
        # generators fetch it without a key), and versions are only in the init log.
        version=API_PREFIX.strip("/"),
        description="SigLIP 2 text embeddings on CPU, OpenAI-compatible.",
        # A trailing slash is a 404 in OpenAI's shape, not a 307 whose Location would drop
        # API Gateway's stage prefix.
        redirect_slashes=False,
        # Swagger UI and ReDoc load their scripts from a CDN: off, so nothing half-loads
        # offline; the schema itself stays at /openapi.json.
        docs_url=None,
        redoc_url=None,
        openapi_url=OPENAPI_PATH,
        exception_handlers=EXCEPTION_HANDLERS,
    )
    for route in ROUTES:
        app.add_api_route(route.path, route.endpoint, methods=[route.method], **route.options)
        if route.method == "GET":  # the front sends HEAD's status and headers, no content
            app.add_api_route(route.path, route.endpoint, methods=["HEAD"], include_in_schema=False)
    if front is None:
        front = build_front(
            settings,
            authenticator=authenticator,
            observer=observer,
            json_only=json_only,
            allowed_hosts=allowed_hosts,
        )
    response_limit = settings.max_response_bytes or frontend_response_limit
    # The one object the app holds: the routes read it (`served`), nothing else does.
    app.state.served = Served(
        service,
        settings,
        observer=observer,
        response_limit=response_limit,
        bound=derive_inputs_bound(service, settings, response_limit=response_limit),
        run=run_in_threadpool if offload_inference else _on_the_loop,
    )
    app.add_middleware(front.around)
    return app


def build_front(
    settings: Settings,
    *,
    authenticator: Authenticator | None = None,
    observer: RequestObserver | None = None,
    json_only: bool = False,
    allowed_hosts: frozenset[str] | None = None,
) -> Front:
    """The front door of an app of these routes (front.py): the key check, admission, the
    body bounds; ``json_only`` and ``allowed_hosts`` are `serve`'s checks."""
    return Front(
        admission=Admission(
            in_flight=settings.max_concurrent_requests, pending=settings.max_pending_requests
        ),
        max_body_bytes=settings.max_request_bytes,
        routes=route_table(),
        body_routes=frozenset((r.method, r.path) for r in ROUTES if r.takes_body),
        authenticate=authenticator,
        observer=observer,
        body_idle_seconds=settings.body_idle_timeout_seconds,
        body_total_seconds=settings.body_total_timeout_seconds,
        json_only=json_only,
        allowed_hosts=allowed_hosts,
    )


def invocation_deadline(scope: Scope, settings: Settings) -> Deadline | None:
    """The Lambda invocation's clock (Mangum puts the context in the scope); None elsewhere."""
    remaining = getattr(scope.get("aws.context"), "get_remaining_time_in_millis", None)
    if not callable(remaining):
        return None
    return Deadline(remaining, reserve_s=settings.time_reserve_ms / 1000.0)
