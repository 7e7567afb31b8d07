"""HTTP errors without a web framework: the one table from error kind to (HTTP status, OpenAI
error ``type``), the headers and JSON body of every error answer, the messages that name the
fix (a missing key, a path without ``/v1``), and the request-body limit.

Both layers that answer errors use it: `app` (FastAPI's routes and handlers) and `front` (the
ASGI layer in front of them, which refuses before the app sees a request). So an error reads
the same whichever layer gave it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..engine.errors import (
    AuthenticationError,
    ConfigError,
    InferenceError,
    InsufficientTimeError,
    InvalidInputError,
    KeysUnavailableError,
    MethodNotAllowedError,
    ModelLoadError,
    ModelNotFoundError,
    OverloadedError,
    PayloadTooLargeError,
    RequestTimeoutError,
    ResponseTooLargeError,
    RouteNotFoundError,
    ShuttingDownError,
    SiglipError,
    TooManyInputsError,
    UnsupportedMediaTypeError,
    scrubbed,
)
from .schemas import error_body

#: Each error kind -> (HTTP status, OpenAI error ``type``). A kind not listed is a 500.
ERRORS: dict[type[SiglipError], tuple[int, str]] = {
    InvalidInputError: (400, "invalid_request_error"),
    AuthenticationError: (401, "invalid_request_error"),
    ModelNotFoundError: (404, "invalid_request_error"),
    RouteNotFoundError: (404, "invalid_request_error"),
    MethodNotAllowedError: (405, "invalid_request_error"),
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
#: Added to every 401: where a client finds its key.
KEY_SOURCE = (
    "Where the key comes from: docs/api.md#api-keys (deployed with template.yaml: the "
    "Secrets Manager secret named by the stack's ApiKeySecretArn output)."
)
#: The prefix of every OpenAI route: an OpenAI client's base URL ends with it.
API_PREFIX = "/v1"


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
    """The answer to an error: a 500 says only `INTERNAL_ERROR_MESSAGE`, a 401 where the key
    comes from."""
    status, error_type = status_for(exc)
    message = exc.message
    if status == 500:
        message = INTERNAL_ERROR_MESSAGE
    elif status == 401:
        message = f"{message} {KEY_SOURCE}"
    retry_after = getattr(exc, "retry_after", None)
    headers = headers_for(status, retry_after=retry_after)
    if isinstance(exc, MethodNotAllowedError):
        headers["Allow"] = exc.allow
    return ErrorAnswer(
        status,
        headers,
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


def route_not_found(method: str, path: str, routes: Sequence[tuple[str, str]]) -> SiglipError:
    """The 404 of a path that is no route: the routes there are, and, for a route's path
    without ``/v1`` (a client whose base URL lacks it), the base URL to use."""
    asked = f"{short(method, 20)} {short(path, 100)}"
    if (method, API_PREFIX + path) in routes:
        return RouteNotFoundError(
            f"Invalid URL ({asked}): this API's routes start with {API_PREFIX}; use "
            f"{method} {API_PREFIX}{path}, i.e. a base URL that ends in {API_PREFIX} "
            f"(OpenAI clients: base_url='http://<host>:<port>{API_PREFIX}')"
        )
    listed = ", ".join(f"{m} {p}" for m, p in routes)
    return RouteNotFoundError(f"Invalid URL ({asked}); the routes are {listed}")


def method_not_allowed(method: str, path: str, allowed: Sequence[str]) -> MethodNotAllowedError:
    """The 405 of a route's path asked with another method (``Allow`` lists the right ones)."""
    return MethodNotAllowedError(
        f"Method {short(method, 20)} is not allowed for {short(path, 100)}",
        allow=", ".join(allowed),
    )


def unexpected(exc: BaseException) -> str:
    """What an unexpected exception was, fit for a log: its type, the ``file:line`` of its
    innermost frame and its scrubbed message (the traceback stays out of the log: its last
    line repeats the message unscrubbed). Never sent to the client."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = "?"
    if tb is not None:
        where = f"{tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"
    return f"{type(exc).__name__} at {where}: {scrubbed(str(exc))}"


def short(text: str, limit: int) -> str:
    """A short, escaped prefix of untrusted text for an error message."""
    escaped = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return escaped if len(escaped) <= limit else escaped[: limit - 3] + "..."


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
