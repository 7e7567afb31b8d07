"""HTTP errors without a web framework: the one table from error kind to (HTTP status, OpenAI
error ``type``), the headers and JSON body of every error answer, and the request-body limit.

Both layers that answer errors use it: `api` (the FastAPI app) and `ingress` (the raw ASGI
layer under ``serve``, which refuses before the app sees a request). So an error reads the
same whichever layer gave it, and neither imports the other for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..engine.errors import (
    AuthenticationError,
    ConfigError,
    InferenceError,
    InsufficientTimeError,
    InvalidInputError,
    KeysUnavailableError,
    ModelLoadError,
    ModelNotFoundError,
    OverloadedError,
    PayloadTooLargeError,
    RequestTimeoutError,
    ResponseTooLargeError,
    ShuttingDownError,
    SiglipError,
    TooManyInputsError,
    UnsupportedMediaTypeError,
)
from .schemas import error_body

#: Each error kind -> (HTTP status, OpenAI error ``type``). A kind not listed is a 500.
ERRORS: dict[type[SiglipError], tuple[int, str]] = {
    InvalidInputError: (400, "invalid_request_error"),
    AuthenticationError: (401, "invalid_request_error"),
    ModelNotFoundError: (404, "invalid_request_error"),
    RequestTimeoutError: (408, "invalid_request_error"),
    PayloadTooLargeError: (413, "invalid_request_error"),
    TooManyInputsError: (413, "invalid_request_error"),
    UnsupportedMediaTypeError: (415, "invalid_request_error"),
    # Both say "split the request": the same request gets the same answer, and OpenAI's
    # clients retry 408, 409, 429 and 5xx but not 413 (docs/api.md).
    ResponseTooLargeError: (413, "invalid_request_error"),
    InsufficientTimeError: (413, "invalid_request_error"),
    OverloadedError: (429, "rate_limit_error"),
    ShuttingDownError: (503, "server_error"),
    KeysUnavailableError: (503, "server_error"),
    InferenceError: (500, "server_error"),
    ModelLoadError: (500, "server_error"),
    ConfigError: (500, "server_error"),
}
SERVER_ERROR = (500, "server_error")
#: Sent with every 429 (admission full) and 503 (shutting down): both say "retry shortly",
#: and the OpenAI client honours the header.
RETRY_AFTER_SECONDS = "1"
#: A 500's message: what went wrong inside is logged, never echoed.
INTERNAL_ERROR_MESSAGE = "The server had an error while processing your request."


@dataclass(frozen=True)
class ErrorAnswer:
    """One error answer: status, the headers its status calls for, the JSON body."""

    status: int
    headers: dict[str, str]
    body: bytes


def status_for(exc: SiglipError) -> tuple[int, str]:
    """The HTTP status and OpenAI type of an error (its nearest listed base class)."""
    for kind in type(exc).__mro__:
        if kind in ERRORS:
            return ERRORS[kind]
    return SERVER_ERROR


def error_answer(exc: SiglipError) -> ErrorAnswer:
    """The answer to an error: a 500 says only `INTERNAL_ERROR_MESSAGE`."""
    status, error_type = status_for(exc)
    message = INTERNAL_ERROR_MESSAGE if status == 500 else exc.message
    retry_after = getattr(exc, "retry_after", None)
    return ErrorAnswer(
        status,
        headers_for(status, retry_after=retry_after),
        error_json(message, type=error_type, param=exc.param, code=exc.code),
    )


def headers_for(status: int, *, retry_after: int | None = None) -> dict[str, str]:
    """The headers an error status calls for: the auth scheme, or when to retry."""
    if status == 401:
        return {"WWW-Authenticate": "Bearer"}
    if status in (429, 503):
        return {"Retry-After": str(retry_after) if retry_after else RETRY_AFTER_SECONDS}
    if status == 408:
        return {"Connection": "close"}
    return {}


def error_json(message: str, *, type: str, param: str | None, code: str | None) -> bytes:
    """OpenAI's error body as compact UTF-8 JSON (as Starlette's JSONResponse writes it)."""
    return json.dumps(
        error_body(message, type=type, param=param, code=code),
        ensure_ascii=False,
        allow_nan=False,
        separators=(",", ":"),
    ).encode()


def body_too_large(limit: int) -> PayloadTooLargeError:
    """The 413 of a request body over ``limit`` bytes (declared or counted)."""
    return PayloadTooLargeError(f"request body is larger than {limit} bytes")


def declares_more_than(content_length: str | bytes | None, limit: int) -> bool:
    """Whether a ``Content-Length`` value declares more than ``limit`` bytes.

    Only plain ASCII digits count (``str.isdigit`` also accepts '²', which int() refuses);
    anything else is left to the streamed count, which is the check that counts. Never
    int() of thousands of digits (int() refuses more than 4300).
    """
    if content_length is None:
        return False
    text = content_length.decode("latin-1") if isinstance(content_length, bytes) else content_length
    if not (text.isascii() and text.isdigit()):
        return False
    digits = text.lstrip("0")
    return len(digits) > len(str(limit)) or (digits != "" and int(digits) > limit)
