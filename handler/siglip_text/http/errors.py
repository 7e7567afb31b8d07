"""HTTP errors without a web framework: the protocol's own error kinds, the one table from
each error kind to (HTTP status, OpenAI error ``type``, headers), the JSON body of every
error answer, the messages that name the fix (a missing key, a path without ``/v1``), and
the request-body limit.

Both layers that answer errors use it: `app` (FastAPI's routes and handlers) and `front` (the
ASGI layer in front of them, which refuses before the app sees a request). So an error reads
the same whichever layer gave it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..engine.errors import (
    ConfigError,
    InferenceError,
    InsufficientTimeError,
    InvalidInputError,
    ModelLoadError,
    ModelNotFoundError,
    SiglipError,
    TooManyInputsError,
    scrubbed,
)
from .schemas import error_body

# --- the protocol's own kinds ----------------------------------------------------------------


class RouteNotFoundError(SiglipError):
    """Raised when no route has the request's path (the message names the routes)."""

    code = "not_found"


class MethodNotAllowedError(SiglipError):
    """Raised when the request's path is a route, but not for its method."""

    code = "method_not_allowed"

    def __init__(self, message: str, *, allow: str) -> None:
        super().__init__(message)
        self.headers = {"Allow": allow}


class InvalidHostError(InvalidInputError):
    """Raised when `serve`, bound to loopback, gets a ``Host`` that is not a loopback name."""

    code = "invalid_host"


class InvalidHeaderError(InvalidInputError):
    """Raised when a request header breaks HTTP's rules in a way that changes its meaning
    (an ``Authorization`` sent twice); the message names the header."""

    code = "invalid_header"


class InvalidFramingError(InvalidInputError):
    """Raised when a request's HTTP framing is ambiguous or cannot be parsed (`serve`'s parser
    refused it, or Content-Length and Transfer-Encoding disagree): the connection must close."""

    code = "invalid_http_request"


class UnknownFieldError(InvalidInputError):
    """Raised when a request body holds a field the endpoint does not define (OpenAI's rule)."""

    code = "unknown_parameter"


class AuthenticationError(SiglipError):
    """Raised when the API key is missing or wrong (auth mode ``api-key``)."""

    code = "invalid_api_key"


class RequestTimeoutError(SiglipError):
    """Raised when a request body arrives too slowly (`serve`: idle or total read timeout)."""

    code = "request_timeout"


class PayloadTooLargeError(SiglipError):
    """Raised when a request body is larger than the configured bound."""

    code = "payload_too_large"


class ResponseTooLargeError(SiglipError):
    """Raised when a request's answer could exceed the frontend's response limit."""

    code = "response_too_large"


class UnsupportedMediaTypeError(SiglipError):
    """Raised when a request body is not declared ``Content-Type: application/json``."""

    code = "unsupported_media_type"


class UnsupportedContentEncodingError(UnsupportedMediaTypeError):
    """Raised when a request body is sent with a ``Content-Encoding`` (gzip, ...): bodies are
    read as sent, so only ``identity`` is accepted."""

    code = "unsupported_content_encoding"


class HeadersTooLargeError(SiglipError):
    """Raised when a request's header section is larger than the server accepts (`serve`)."""

    code = "request_header_fields_too_large"


class OverloadedError(SiglipError):
    """Raised when admission is full: in-flight plus pending requests reached the bound."""

    code = "rate_limit_exceeded"


class ShuttingDownError(SiglipError):
    """Raised when `serve` stops and its shutdown grace period ran out before a request ran."""

    code = "server_shutting_down"


class KeysUnavailableError(SiglipError):
    """Raised when no API key may be used: the secret could not be read for longer than the
    maximum staleness (or since the keys were dropped). Fails closed: 503, never open."""

    code = "auth_unavailable"

    def __init__(self, *, retry_after: int = 1) -> None:
        super().__init__(
            "The API keys cannot be checked right now (the key store is unreachable); retry "
            "after the delay in the Retry-After header"
        )
        self.headers = {"Retry-After": str(retry_after)}


# --- the one table ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """How an error kind is answered: HTTP status, OpenAI error ``type``, and the headers its
    answer carries. A header's value here is its default; an error may carry its own value in
    its ``headers`` attribute (the ``Allow`` of a 405, a 503's ``Retry-After``); None: the
    error must carry it."""

    status: int
    type: str
    headers: Mapping[str, str | None] = field(default_factory=dict)


INVALID = "invalid_request_error"
#: Sent with every 429 (admission full) and 503 (shutting down, keys unavailable): each says
#: "retry shortly", and the OpenAI client honours the header.
RETRY_AFTER_SECONDS = "1"
_RETRY = {"Retry-After": RETRY_AFTER_SECONDS}

#: Each error kind -> its answer. A kind not listed answers as its nearest listed base class;
#: one with none is a 500 (`SERVER_ERROR`).
ERRORS: dict[type[SiglipError], Kind] = {
    InvalidInputError: Kind(400, INVALID),
    AuthenticationError: Kind(401, INVALID, {"WWW-Authenticate": "Bearer"}),
    ModelNotFoundError: Kind(404, INVALID),
    RouteNotFoundError: Kind(404, INVALID),
    MethodNotAllowedError: Kind(405, INVALID, {"Allow": None}),
    RequestTimeoutError: Kind(408, INVALID, {"Connection": "close"}),
    PayloadTooLargeError: Kind(413, INVALID),
    TooManyInputsError: Kind(413, INVALID),
    # Both say "split the request": the same request gets the same answer, and OpenAI's
    # clients retry 408, 409, 429 and 5xx but not 413 (docs/api.md).
    ResponseTooLargeError: Kind(413, INVALID),
    InsufficientTimeError: Kind(413, INVALID),
    UnsupportedMediaTypeError: Kind(415, INVALID),
    # RFC 9110 section 15.5.16: a 415 for a content coding names the codings accepted.
    UnsupportedContentEncodingError: Kind(415, INVALID, {"Accept-Encoding": "identity"}),
    # RFC 9112 section 6.1: after such a request the bytes that follow cannot be trusted to
    # start the next one, so the connection closes.
    InvalidFramingError: Kind(400, INVALID, {"Connection": "close"}),
    HeadersTooLargeError: Kind(431, INVALID, {"Connection": "close"}),
    OverloadedError: Kind(429, "rate_limit_error", _RETRY),
    ShuttingDownError: Kind(503, "server_error", _RETRY),
    KeysUnavailableError: Kind(503, "server_error", _RETRY),
    InferenceError: Kind(500, "server_error"),
    ModelLoadError: Kind(500, "server_error"),
    ConfigError: Kind(500, "server_error"),
}
SERVER_ERROR = Kind(500, "server_error")
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
    """One error answer: status, the headers its kind calls for, the JSON body."""

    status: int
    headers: dict[str, str]
    body: bytes


def kind_of(exc: SiglipError) -> Kind:
    """How an error is answered: the row of its nearest listed base class."""
    for kind in type(exc).__mro__:
        if kind in ERRORS:
            return ERRORS[kind]
    return SERVER_ERROR


def status_for(exc: SiglipError) -> tuple[int, str]:
    """The HTTP status and OpenAI type of an error (`kind_of`)."""
    kind = kind_of(exc)
    return kind.status, kind.type


def error_answer(exc: SiglipError) -> ErrorAnswer:
    """The answer to an error, from its row in `ERRORS`: a 500 says only
    `INTERNAL_ERROR_MESSAGE`, a 401 where the key comes from."""
    kind = kind_of(exc)
    message = exc.message
    if kind.status == 500:
        message = INTERNAL_ERROR_MESSAGE
    elif kind.status == 401:
        message = f"{message} {KEY_SOURCE}"
    carried: Mapping[str, str] = getattr(exc, "headers", {})
    headers: dict[str, str] = {}
    for name, default in kind.headers.items():
        value = carried.get(name, default)
        if value is not None:
            headers[name] = value
    return ErrorAnswer(
        kind.status,
        headers,
        error_json(message, type=kind.type, param=exc.param, code=exc.code),
    )


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
    listed = ", ".join(f"{m} {p}" for m, p in routes if m != "HEAD")
    return RouteNotFoundError(f"Invalid URL ({asked}); the routes are {listed}")


def method_not_allowed(method: str, path: str, allowed: Sequence[str]) -> MethodNotAllowedError:
    """The 405 of a route's path asked with another method (``Allow`` lists the right ones)."""
    return MethodNotAllowedError(
        f"Method {short(method, 20)} is not allowed for {short(path, 100)}",
        allow=", ".join(allowed),
    )


def refuse_unknown_fields(data: Any, known: Mapping[str, Any], advice: Mapping[str, str]) -> None:
    """OpenAI's rule: a field the endpoint does not define (not in ``known``) is a 400
    (`UnknownFieldError`) that names it: OpenAI's own message, then what to do here
    (``advice``, by field name). Never silently ignored: a client written for another server
    would get an answer other than the one it asked for. Only the keys of a JSON object are
    read (anything else is left to the schema's own refusal)."""
    unknown = [name for name in data if name not in known] if isinstance(data, dict) else []
    if not unknown:
        return
    names = ", ".join(short(name, 40) for name in unknown[:5])
    if len(unknown) > 5:
        names += f" (and {len(unknown) - 5} more)"
    plural = "s" if len(unknown) > 1 else ""
    first = unknown[0]
    hint = advice.get(first) or (
        "this endpoint's fields are " + ", ".join(f"'{f}'" for f in known) + "; remove it"
    )
    raise UnknownFieldError(
        f"Unrecognized request argument{plural} supplied: {names}. {hint[0].upper()}{hint[1:]}",
        param=short(first, 40),
    )


class ErrorLog(Protocol):
    """Where an unexpected error is logged: a `logging.Logger` or Powertools' ``Logger``."""

    def error(self, msg: str, *args: Any, extra: Any = None) -> Any: ...


def unexpected_error(exc: BaseException, log: ErrorLog) -> SiglipError:
    """An exception no one expected: logged on ``log`` for the operator (`unexpected`: type,
    place, scrubbed message; no query text), and the error that answers it, a 500 that says
    nothing of it (`error_answer`)."""
    cause = unexpected(exc)
    log.error("answered 500: unexpected error: %s", cause, extra={"cause": cause})
    return SiglipError(f"unexpected error: {cause}")


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
