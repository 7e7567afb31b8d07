"""The project's exceptions.

The engine raises only these; `http/errors.py`'s `ERRORS` table is the one place that maps each kind
to an HTTP status and an OpenAI error ``type``.
"""

from __future__ import annotations

import re

#: The usual source of token ids that are not this model's: LangChain's OpenAIEmbeddings
#: tokenizes with tiktoken and sends those ids unless told not to.
FOREIGN_TOKEN_IDS_HINT = (
    "ids must be this model's own, not tiktoken's; likely cause: LangChain's OpenAIEmbeddings "
    "without check_embedding_ctx_length=False (which sends the text)"
)


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER_AFTER_EQUALS = re.compile(r"=\s*-?\d+")


def scrubbed(text: str, *, keep_quotes: bool = False, limit: int = 300) -> str:
    """An exception's message fit for a log: its first line, short, with the numbers given
    after ``=`` (ONNX Runtime's ``idx=<token id>``) and, unless ``keep_quotes``, every quoted
    part (where messages copy their input) replaced."""
    lines = text.strip().splitlines()
    line = lines[0] if lines else ""
    if not keep_quotes:
        line = _QUOTED.sub("<quoted>", line)
    line = _NUMBER_AFTER_EQUALS.sub("=<n>", line)
    return line if len(line) <= limit else line[: limit - 3] + "..."


class SiglipError(Exception):
    """Base class of every error this package raises on purpose."""

    #: A short machine-readable string for OpenAI's ``code`` field (or None).
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class ConfigError(SiglipError):
    """Raised when a setting is missing or invalid; the message names the variable."""

    code = "config_error"


class ModelLoadError(SiglipError):
    """Raised at init when an artifact (manifest, tokenizer, ONNX graph) fails its contract."""

    code = "model_load_error"


class InvalidInputError(SiglipError):
    """Raised when a request is malformed or an input is outside the model's contract."""

    code = "invalid_input"


class InvalidHostError(InvalidInputError):
    """Raised when `serve`, bound to loopback, gets a ``Host`` that is not a loopback name."""

    code = "invalid_host"


class TokenIdInputsRejectedError(InvalidInputError):
    """Raised when a request sends token ids and the endpoint takes text only."""

    code = "token_ids_rejected"


class TooManyInputsError(SiglipError):
    """Raised when a request carries more inputs than the configured bound."""

    code = "too_many_inputs"


class PayloadTooLargeError(SiglipError):
    """Raised when a request body is larger than the configured bound."""

    code = "payload_too_large"


class ResponseTooLargeError(SiglipError):
    """Raised when a request's answer could exceed the frontend's response limit."""

    code = "response_too_large"


class InsufficientTimeError(SiglipError):
    """Raised when a request's compute cannot finish in the invocation's remaining time."""

    code = "insufficient_time"


class RouteNotFoundError(SiglipError):
    """Raised when no route has the request's path (the message names the routes)."""

    code = "not_found"


class MethodNotAllowedError(SiglipError):
    """Raised when the request's path is a route, but not for its method."""

    code = "method_not_allowed"

    def __init__(self, message: str, *, allow: str) -> None:
        super().__init__(message)
        self.allow = allow


class ModelNotFoundError(SiglipError):
    """Raised when a request names a model other than the one served."""

    code = "model_not_found"


class AuthenticationError(SiglipError):
    """Raised when the API key is missing or wrong (auth mode ``api-key``)."""

    code = "invalid_api_key"


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
        self.retry_after = retry_after


class RequestTimeoutError(SiglipError):
    """Raised when a request body arrives too slowly (`serve`: idle or total read timeout)."""

    code = "request_timeout"


class UnsupportedMediaTypeError(SiglipError):
    """Raised when a request body is not declared ``Content-Type: application/json``."""

    code = "unsupported_media_type"


class InferenceError(SiglipError):
    """Raised when the model returns something that is not a valid vector (NaN, zero, shape)."""

    code = "inference_error"
