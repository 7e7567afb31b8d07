"""The HTTP surface: ``create_app(service)`` builds the FastAPI app.

This is the only module that imports FastAPI. Every error body has OpenAI's shape and is
written by `http_errors`, whose `ERRORS` is the one place where an error kind becomes an HTTP
status and an OpenAI error type.
The request path: read the body (bounded), parse and validate it in one pass, check it
against the served model (`validate_request` returns tagged inputs), take an admission slot,
embed. Everything under ``/v1`` takes the API key (a router dependency); ``/health`` is open
and says only that the service is up and which model it serves.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..engine.config import Settings
from ..engine.errors import (
    FOREIGN_TOKEN_IDS_HINT,
    InferenceError,
    InvalidInputError,
    ModelNotFoundError,
    SiglipError,
    TokenIdInputsRejectedError,
    TooManyInputsError,
    scrubbed,
)
from ..engine.limits import Deadline, check_response_fits
from ..engine.self_check import expected_probe
from ..engine.service import (
    PROBE_TEXT,
    Embeddings,
    EmbeddingService,
    Inputs,
    TextInputs,
    TokenIdInputs,
)
from .admission import Admission
from .errors import body_too_large, declares_more_than, error_answer, error_json
from .schemas import (
    EncodingFormat,
    ErrorResponse,
    OpenAICompatEmbeddingRequest,
    OpenAICompatEmbeddingResponse,
    embeddings_response,
)

logger = logging.getLogger("siglip_text.http.app")

INPUT_SHAPE_MESSAGE = (
    "'input' must be a string, an array of strings, an array of token ids "
    "(integers), or an array of arrays of token ids"
)


class RequestObserver(Protocol):
    """Receives what each request did (metrics, logs); never the query text."""

    def embeddings_served(
        self, *, inputs: int, tokens: int, latency_ms: float, cache_hits: int
    ) -> None: ...

    def request_failed(self, *, status: int, code: str | None) -> None: ...


#: Checks the ``Authorization`` header value; raises AuthenticationError when it is wrong.
Authenticator = Callable[[str | None], None]


def create_app(
    service: EmbeddingService,
    settings: Settings | None = None,
    *,
    observer: RequestObserver | None = None,
    authenticator: Authenticator | None = None,
    offload_inference: bool = True,
    frontend_response_limit: int | None = None,
) -> FastAPI:
    """Build the app around a loaded service. Settings bound the work of each request.

    ``frontend_response_limit`` is the response size the platform in front allows (Lambda's
    6 MB), used when ``SIGLIP_MAX_RESPONSE_BYTES`` is unset; None: no limit (`serve`).

    ``offload_inference`` runs tokenization, the model and serialization in a worker thread,
    so that the event loop keeps answering (and refusing with 429) while a request computes.
    Lambda serves one request per environment at a time and turns it off: there the thread
    hop is a cost with nothing to gain (docs/performance.md).
    """
    settings = settings or Settings()
    response_limit = settings.max_response_bytes or frontend_response_limit
    admission = Admission(
        in_flight=settings.max_concurrent_requests, pending=settings.max_pending_requests
    )
    app = FastAPI(
        title="siglip-text",
        version=__version__,
        description="SigLIP 2 text embeddings on CPU, OpenAI-compatible.",
        # A trailing slash is a 404 in OpenAI's shape, not a 307 whose Location would drop
        # API Gateway's stage prefix.
        redirect_slashes=False,
        # Swagger UI and ReDoc load their scripts from a CDN: off, so nothing half-loads
        # offline; the schema itself stays at /openapi.json.
        docs_url=None,
        redoc_url=None,
    )
    app.state.service = service
    app.state.admission = admission
    # The key checker, if any: snapshot hooks reach it here (its forget() and reload()).
    app.state.authenticator = authenticator

    def error_response(exc: SiglipError) -> Response:
        answer = error_answer(exc)
        if answer.status >= 500:
            # The client gets a generic message: the cause is for the operator, here (never
            # query text: the engine's messages name checks, not inputs).
            logger.error(
                "answered %d (%s): %s",
                answer.status,
                exc.code,
                exc.message,
                extra={"status": answer.status, "code": exc.code, "cause": exc.message},
            )
        if observer is not None:
            observer.request_failed(status=answer.status, code=exc.code)
        return Response(
            answer.body,
            status_code=answer.status,
            headers=answer.headers,
            media_type="application/json",
        )

    @app.exception_handler(SiglipError)
    async def _siglip_error(request: Request, exc: SiglipError) -> Response:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            message = (
                f"Invalid URL ({_short(request.method, 20)} {_short(request.url.path, 100)}); "
                f"the routes are {_routes(app)}"
            )
            code: str | None = "not_found"
        elif exc.status_code == 405:
            message = f"Method {_short(request.method, 20)} is not allowed for {request.url.path}"
            code = "method_not_allowed"
        else:
            message, code = str(exc.detail), None
        if observer is not None:
            observer.request_failed(status=exc.status_code, code=code)
        return Response(
            error_json(message, type="invalid_request_error", param=None, code=code),
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
            media_type="application/json",
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        return error_response(InvalidInputError("the request is not valid"))

    @app.get("/health", summary="Liveness and the served model's identity")
    async def health(probe: bool = False) -> dict[str, Any]:
        # Open to anyone (probes): the model's identity only. Versions, threads and init
        # timings are in the init log; cache counters in the metrics (CacheHits).
        body: dict[str, Any] = {
            "status": "ok",
            "model": service.model_id,
            "revision": service.revision,
            "embedding_dimension": service.dimension,
        }
        if probe:
            # ?probe=true: what the pre-traffic hook (a function without this package)
            # holds this version's /v1 answer to: the init's probe text, and the reference
            # export recorded for it with its bound.
            body["probe"] = expected_probe(service.manifest, PROBE_TEXT)
        return body

    async def require_key(request: Request) -> None:
        # async: FastAPI runs a plain `def` dependency in a worker thread, and on Lambda each
        # invocation's new event loop would start that thread on every request.
        if authenticator is None:
            return
        authorization = request.headers.get("authorization")
        if offload_inference:  # serve: a key refresh calls Secrets Manager, off the loop
            await run_in_threadpool(authenticator, authorization)
        else:
            authenticator(authorization)

    # Everything under /v1 is the OpenAI API and takes the key; /health stays open (probes).
    v1 = APIRouter(prefix="/v1", dependencies=[Depends(require_key)])

    @v1.get("/models", summary="The one served model (OpenAI list-models shape)")
    async def list_models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": service.model_id, "object": "model", "created": 0, "owned_by": "siglip-text"}
            ],
        }

    @v1.post(
        "/embeddings",
        summary="Create embeddings (OpenAI-compatible)",
        response_model=OpenAICompatEmbeddingResponse,
        responses={code: {"model": ErrorResponse} for code in (400, 401, 404, 405, 413, 429, 500)},
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": OpenAICompatEmbeddingRequest.model_json_schema()}
                },
            }
        },
    )
    async def create_embeddings(request: Request) -> Response:
        started = time.perf_counter()
        body = await _read_body(request, settings.max_request_bytes)
        if offload_inference:  # serve: a pathological 6 MiB body takes a second to parse
            parsed, inputs = await run_in_threadpool(_parse_and_validate, body, service, settings)
        else:
            parsed, inputs = _parse_and_validate(body, service, settings)
        encoding: EncodingFormat = parsed.encoding_format or "float"
        check_response_fits(
            len(inputs.items),
            limit=response_limit,
            dimension=service.dimension,
            encoding=encoding,
            model=service.model_id,
            max_tokens=service.max_tokens,
        )
        deadline = invocation_deadline(request.scope, settings)
        if settings.log_inputs:
            # In the message itself: `serve`'s plain log format drops `extra` fields.
            logger.info("inputs: %s", [_short(repr(i), 200) for i in inputs.items[:16]])

        def work() -> tuple[bytes, Embeddings]:
            try:
                result = service.embed(inputs, deadline)
                content = embeddings_response(
                    result.vectors,
                    model=service.model_id,
                    prompt_tokens=result.prompt_tokens,
                    encoding_format=encoding,
                )
            except SiglipError:
                raise
            except Exception as exc:  # a bug or a runtime fault: never echoed to the client
                raise InferenceError(
                    f"unexpected error while embedding: {type(exc).__name__} at "
                    f"{_where(exc)}: {scrubbed(str(exc))}"
                ) from exc
            return content, result

        async with admission.slot():
            content, result = await run_in_threadpool(work) if offload_inference else work()
        if observer is not None:
            observer.embeddings_served(
                inputs=len(inputs.items),
                tokens=result.prompt_tokens,
                latency_ms=(time.perf_counter() - started) * 1000.0,
                cache_hits=result.cache_hits,
            )
        return Response(content, media_type="application/json")

    app.include_router(v1)
    return app


def invocation_deadline(scope: Mapping[str, Any], settings: Settings) -> Deadline | None:
    """The Lambda invocation's clock (Mangum puts the context in the scope); None elsewhere."""
    remaining = getattr(scope.get("aws.context"), "get_remaining_time_in_millis", None)
    if not callable(remaining):
        return None
    return Deadline(remaining, reserve_s=settings.time_reserve_ms / 1000.0)


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it is known to exceed ``limit`` bytes."""
    if declares_more_than(request.headers.get("content-length"), limit):
        raise body_too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise body_too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _parse_and_validate(
    body: bytes, service: EmbeddingService, settings: Settings
) -> tuple[OpenAICompatEmbeddingRequest, Inputs]:
    parsed = parse_request(body)
    return parsed, validate_request(parsed, service, settings)


def parse_request(body: bytes) -> OpenAICompatEmbeddingRequest:
    """JSON -> the request model in one pass; every failure is a 400 that does not echo the
    input (a JSON syntax error says where: line and column)."""
    if not body.strip():
        raise InvalidInputError("the request body is empty; send a JSON object")
    try:
        return OpenAICompatEmbeddingRequest.model_validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
    first = errors[0]
    if first["type"] == "json_invalid":
        detail = str(first["msg"]).removeprefix("Invalid JSON: ")
        if "recursion limit" in detail:
            raise InvalidInputError("the request body is nested too deeply") from None
        raise InvalidInputError(f"the request body is not valid JSON (UTF-8): {detail}") from None
    if first["type"] == "model_type":
        raise InvalidInputError("the request body must be a JSON object") from None
    fields = [str(e["loc"][0]) for e in errors if e["loc"]]
    if "input" in fields or not fields:
        missing = any(e["type"] == "missing" for e in errors if e["loc"] == ("input",))
        message = "'input' is required" if missing else INPUT_SHAPE_MESSAGE
        raise InvalidInputError(message, param="input") from None
    first = next(e for e in errors if e["loc"])
    field = str(first["loc"][0])
    raise InvalidInputError(f"invalid '{field}': {first['msg']}", param=field) from None


def validate_request(
    request: OpenAICompatEmbeddingRequest, service: EmbeddingService, settings: Settings
) -> Inputs:
    """Apply the served model's rules; return the inputs, tagged as texts or token ids."""
    if request.model is not None and request.model != service.model_id:
        raise ModelNotFoundError(
            f"The model '{_short(request.model, 80)}' is not served here; this endpoint serves "
            f"'{service.model_id}'",
            param="model",
        )
    if request.dimensions is not None and request.dimensions != service.dimension:
        raise InvalidInputError(
            f"'dimensions' may only be {service.dimension}, this model's native dimension "
            "(SigLIP vectors cannot be shortened)",
            param="dimensions",
        )
    inputs = as_inputs(request.input)
    if not inputs.items:
        raise InvalidInputError("'input' must not be an empty array", param="input")
    if len(inputs.items) > settings.max_inputs_per_request:
        raise TooManyInputsError(
            f"'input' has {len(inputs.items)} items; at most {settings.max_inputs_per_request} "
            "are accepted per request",
            param="input",
        )
    if isinstance(inputs, TokenIdInputs) and settings.token_id_inputs == "reject":
        raise TokenIdInputsRejectedError(
            "'input' is token ids, and this endpoint takes text only "
            f"(SIGLIP_TOKEN_ID_INPUTS=reject); send the text instead: {FOREIGN_TOKEN_IDS_HINT}",
            param="input",
        )
    # An empty string is a text (<eos> then pads, as the training pipeline embeds it); an
    # empty token array has no token to feed.
    if not isinstance(inputs, TextInputs):
        for i, item in enumerate(inputs.items):
            if len(item) == 0:
                raise InvalidInputError(f"input[{i}] is an empty token array", param="input")
    return inputs


def as_inputs(raw: str | list[str] | list[int] | list[list[int]]) -> Inputs:
    """The one place the input's form is read: pydantic has checked it is one of the four."""
    if isinstance(raw, str):
        return TextInputs([raw])
    if not raw:
        return TextInputs([])
    if isinstance(raw[0], str):
        return TextInputs(raw)
    if isinstance(raw[0], int):
        return TokenIdInputs([raw])  # one token-id sequence
    return TokenIdInputs(raw)


def _where(exc: BaseException) -> str:
    """``file:line`` of the innermost frame of an exception (the traceback stays out of the
    log: its last line repeats the message unscrubbed)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "?"
    return f"{tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"


def _routes(app: FastAPI) -> str:
    """'POST /v1/embeddings, GET /v1/models, ...': the app's own routes (its OpenAPI paths)."""
    found = [
        f"{method.upper()} {path}"
        for path, operations in app.openapi().get("paths", {}).items()
        for method in operations
    ]
    if app.openapi_url:
        found.append(f"GET {app.openapi_url}")
    return ", ".join(found)


def _short(text: str, limit: int) -> str:
    """A short, escaped prefix of untrusted text for an error message."""
    escaped = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return escaped if len(escaped) <= limit else escaped[: limit - 3] + "..."
