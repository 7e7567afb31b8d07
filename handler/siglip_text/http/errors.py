"""HTTP errors without a web framework: the protocol's own error kinds, the one table from
each kind to (HTTP status, OpenAI error ``type``, headers), and the answer it makes (the JSON
body of every error). Every layer that answers an error answers through it, so an error
reads the same whichever layer gave it (docs/architecture.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..engine.errors import (
    ConfigError,
    InferenceError,
    InsufficientTimeError,
    InvalidInputError,
    ModelLoadError,
    ModelNotFoundError,
    SiglipError,
    TooManyInputsError,
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
