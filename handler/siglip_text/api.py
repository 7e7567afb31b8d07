"""The HTTP surface: ``create_app(service)`` builds the FastAPI app.

This is the only module that imports FastAPI, and `STATUS_BY_ERROR` is the one place where an
error kind becomes an HTTP status. Every error body has OpenAI's shape.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import __version__
from .admission import Admission
from .config import Settings
from .service import Embeddings, EmbeddingService
from .errors import (
    AuthenticationError,
    ConfigError,
    InferenceError,
    InvalidInputError,
    ModelLoadError,
    ModelNotFoundError,
    OverloadedError,
    PayloadTooLargeError,
    SiglipError,
    TooManyInputsError,
)
from .schemas import (
    EncodingFormat,
    ErrorResponse,
    OpenAICompatEmbeddingRequest,
    OpenAICompatEmbeddingResponse,
    embeddings_response,
    error_body,
)

logger = logging.getLogger("siglip_text.api")

STATUS_BY_ERROR: dict[type[SiglipError], int] = {
    InvalidInputError: 400,
    AuthenticationError: 401,
    ModelNotFoundError: 404,
    PayloadTooLargeError: 413,
    TooManyInputsError: 413,
    OverloadedError: 429,
    InferenceError: 500,
    ModelLoadError: 500,
    ConfigError: 500,
}
RETRY_AFTER_SECONDS = "1"
INTERNAL_ERROR_MESSAGE = "The server had an error while processing your request."
INPUT_SHAPE_MESSAGE = (
    "'input' must be a non-empty string, an array of strings, an array of token ids "
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


def status_for(exc: SiglipError) -> int:
    """The HTTP status of an error kind (its nearest mapped base class; 500 otherwise)."""
    for kind in type(exc).__mro__:
        if kind in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[kind]
    return 500


def create_app(
    service: EmbeddingService,
    settings: Settings | None = None,
    *,
    observer: RequestObserver | None = None,
    authenticator: Authenticator | None = None,
    offload_inference: bool = True,
) -> FastAPI:
    """Build the app around a loaded service. Settings bound the work of each request.

    ``offload_inference`` runs tokenization, the model and serialization in a worker thread,
    so that the event loop keeps answering (and refusing with 429) while a request computes.
    Lambda serves one request per environment at a time and turns it off: the thread hop
    cost 0.35 ms per request there (measured with benchmarks/run.py on the demo model).
    """
    settings = settings or Settings()
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
    )
    app.state.service = service
    app.state.admission = admission

    def error_response(exc: SiglipError) -> JSONResponse:
        status = status_for(exc)
        message = exc.message if status < 500 else INTERNAL_ERROR_MESSAGE
        headers = {"Retry-After": RETRY_AFTER_SECONDS} if status == 429 else None
        if status == 401:
            headers = {"WWW-Authenticate": "Bearer"}
        if observer is not None:
            observer.request_failed(status=status, code=exc.code)
        return JSONResponse(
            error_body(message, type=exc.error_type, param=exc.param, code=exc.code),
            status_code=status,
            headers=headers,
        )

    @app.exception_handler(SiglipError)
    async def _siglip_error(request: Request, exc: SiglipError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            message = f"Invalid URL ({_short(request.method, 20)} {_short(request.url.path, 100)})"
            code: str | None = "not_found"
        elif exc.status_code == 405:
            message = f"Method {_short(request.method, 20)} is not allowed for {request.url.path}"
            code = "method_not_allowed"
        else:
            message, code = str(exc.detail), None
        if observer is not None:
            observer.request_failed(status=exc.status_code, code=code)
        return JSONResponse(
            error_body(message, type="invalid_request_error", param=None, code=code),
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(InvalidInputError("the request is not valid"))

    @app.get("/health", summary="Model identity and runtime versions")
    async def health() -> dict[str, Any]:
        described = service.describe()
        return {
            "status": "ok",
            **described,
            "intra_op_threads": settings.intra_op_threads(),
            "max_inputs_per_request": settings.max_inputs_per_request,
            "init": service.init_timings.as_dict(),
            "cache": service.cache_stats(),
        }

    @app.get("/v1/models", summary="The one served model (OpenAI list-models shape)")
    async def list_models(request: Request) -> dict[str, Any]:
        # Everything under /v1 is the OpenAI API and takes the key; /health stays open (probes).
        if authenticator is not None:
            authenticator(request.headers.get("authorization"))
        return {
            "object": "list",
            "data": [
                {"id": service.model_id, "object": "model", "created": 0, "owned_by": "siglip-text"}
            ],
        }

    @app.post(
        "/v1/embeddings",
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
        if authenticator is not None:
            authenticator(request.headers.get("authorization"))
        body = await _read_body(request, settings.max_request_bytes)
        parsed = parse_request(body)
        inputs = validate_request(parsed, service, settings)
        encoding: EncodingFormat = parsed.encoding_format or "float"
        if settings.log_inputs:
            # In the message itself: `serve`'s plain log format drops `extra` fields.
            logger.info("inputs: %s", [_short(repr(i), 200) for i in inputs[:16]])

        def work() -> tuple[bytes, Embeddings]:
            try:
                result = _embed(service, inputs)
                content = embeddings_response(
                    result.vectors,
                    model=service.model_id,
                    prompt_tokens=result.prompt_tokens,
                    encoding_format=encoding,
                )
            except SiglipError:
                raise
            except Exception as exc:  # a bug or a runtime fault: log it, never echo it
                logger.exception("unexpected error while embedding")
                raise InferenceError("unexpected error") from exc
            return content, result

        async with admission.slot():
            content, result = await run_in_threadpool(work) if offload_inference else work()
        if observer is not None:
            observer.embeddings_served(
                inputs=len(inputs),
                tokens=result.prompt_tokens,
                latency_ms=(time.perf_counter() - started) * 1000.0,
                cache_hits=result.cache_hits,
            )
        return Response(content, media_type="application/json")

    return app


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it is known to exceed ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    # Only plain ASCII digits: str.isdigit() also accepts '²', which int() refuses, and int()
    # refuses more than 4300 digits; the streamed count below is the check that counts.
    digits = declared.lstrip("0") if declared.isascii() and declared.isdigit() else ""
    if len(digits) > len(str(limit)) or (digits and int(digits) > limit):
        raise PayloadTooLargeError(f"request body is larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLargeError(f"request body is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_request(body: bytes) -> OpenAICompatEmbeddingRequest:
    """JSON -> the request model; every failure is a 400 that does not echo the input."""
    if not body.strip():
        raise InvalidInputError("the request body is empty; send a JSON object")
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise InvalidInputError("the request body is not valid JSON (UTF-8)") from None
    except RecursionError:
        raise InvalidInputError("the request body is nested too deeply") from None
    if not isinstance(data, dict):
        raise InvalidInputError("the request body must be a JSON object")
    try:
        return OpenAICompatEmbeddingRequest.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        fields = [str(e["loc"][0]) for e in errors if e["loc"]]
        if "input" in fields or not fields:
            missing = any(e["type"] == "missing" for e in errors if e["loc"] == ("input",))
            message = "'input' is required" if missing else INPUT_SHAPE_MESSAGE
            raise InvalidInputError(message, param="input") from None
        first = next(e for e in errors if e["loc"])
        field = str(first["loc"][0])
        raise InvalidInputError(f"invalid '{field}': {first['msg']}", param=field) from None
    except RecursionError:
        raise InvalidInputError("the request body is nested too deeply") from None


def validate_request(
    request: OpenAICompatEmbeddingRequest, service: EmbeddingService, settings: Settings
) -> list[str] | list[list[int]]:
    """Apply the served model's rules; return the inputs as a list (strings or id lists)."""
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
    raw = request.input
    inputs: list[str] | list[list[int]]
    if isinstance(raw, str):
        inputs = [raw]
    elif raw and isinstance(raw[0], int):
        inputs = [raw]  # one token-id sequence
    else:
        inputs = cast("list[str] | list[list[int]]", raw)
    if not inputs:
        raise InvalidInputError("'input' must not be an empty array", param="input")
    if len(inputs) > settings.max_inputs_per_request:
        raise TooManyInputsError(
            f"'input' has {len(inputs)} items; at most {settings.max_inputs_per_request} are "
            "accepted per request",
            param="input",
        )
    for i, item in enumerate(inputs):
        if len(item) == 0:
            what = "an empty string" if isinstance(item, str) else "an empty token array"
            raise InvalidInputError(f"input[{i}] is {what}", param="input")
    return inputs


def _embed(service: EmbeddingService, inputs: list[str] | list[list[int]]) -> Embeddings:
    if isinstance(inputs[0], str):
        return service.embed_texts(inputs)
    return service.embed_token_ids(inputs)


def _short(text: str, limit: int) -> str:
    """A short, escaped prefix of untrusted text for an error message."""
    escaped = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return escaped if len(escaped) <= limit else escaped[: limit - 3] + "..."
