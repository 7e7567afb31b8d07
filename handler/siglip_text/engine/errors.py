"""The engine's exceptions: what loading, tokenizing and embedding can refuse or fail at.

The engine raises only these, and knows nothing of HTTP: the protocol's own kinds (routes,
methods, hosts, media types, body sizes, timeouts, keys, overload, shutdown) live in
`http/errors.py`, whose `ERRORS` table is the one place that maps each kind, these included,
to an HTTP status, an OpenAI error ``type`` and the headers of its answer.
"""

from __future__ import annotations

import re

#: The usual source of token ids that are not this model's: LangChain's OpenAIEmbeddings
#: tokenizes with tiktoken and sends those ids unless told not to.
FOREIGN_TOKEN_IDS_HINT = (
    "ids must be this model's own, not tiktoken's; likely cause: LangChain's OpenAIEmbeddings "
    "without check_embedding_ctx_length=False (which sends the text)"
)


#: Quotation marks, ASCII and typographic: any of them may open or close what a message
#: copies from its input, and an apostrophe is one of them (``can't parse 'x'``).
QUOTE_MARKS = (
    "'\"`"
    "\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u2039\u203a\u00ab\u00bb"  # ‘’‚‛“”„‟‹›«»
    "\u300c\u300d\u300e\u300f\uff02\uff07"  # 「」『』＂＇
)
_NUMBER_AFTER_EQUALS = re.compile(r"=\s*-?\d+")


def scrubbed(text: str, *, keep_quotes: bool = False, limit: int = 300) -> str:
    """An exception's message fit for a log: its first line, short, with the numbers given
    after ``=`` (ONNX Runtime's ``idx=<token id>``) and, unless ``keep_quotes``, every quoted
    part (where messages copy their input) replaced."""
    lines = text.strip().splitlines()
    line = lines[0] if lines else ""
    if not keep_quotes:
        line = unquoted(line)
    line = _NUMBER_AFTER_EQUALS.sub("=<n>", line)
    return line if len(line) <= limit else line[: limit - 3] + "..."


def unquoted(line: str) -> str:
    """``line`` with everything from its first quotation mark to its last replaced by
    ``<quoted>``, and to its end when the last mark may open a quote (a letter or digit
    follows it, or it is the only one).

    Pairing marks cannot tell an apostrophe from a quote, nor a nested or unbalanced quote
    from a closed one; one span from the first mark to the last holds every quoted part
    however it is quoted, at the cost of the unquoted words between two quotes.
    """
    marks = [i for i, char in enumerate(line) if char in QUOTE_MARKS]
    if not marks:
        return line
    first, last = marks[0], marks[-1]
    after = line[last + 1 :]
    if first == last or (after and (after[0].isalnum() or after[0] == "_")):
        return line[:first] + "<quoted>"
    return line[:first] + "<quoted>" + after


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


class InputTooLongError(InvalidInputError):
    """Raised when a request asks not to truncate (``truncate: false``) and an input has more
    tokens than the contract's length."""

    code = "context_length_exceeded"


class TokenIdInputsRejectedError(InvalidInputError):
    """Raised when a request sends token ids and the endpoint takes text only."""

    code = "token_ids_rejected"


class TooManyInputsError(SiglipError):
    """Raised when a request carries more inputs than the configured bound."""

    code = "too_many_inputs"


class InsufficientTimeError(SiglipError):
    """Raised when a request's compute cannot finish in the invocation's remaining time."""

    code = "insufficient_time"


class ModelNotFoundError(SiglipError):
    """Raised when a request names a model other than the one served."""

    code = "model_not_found"


class InferenceError(SiglipError):
    """Raised when the model returns something that is not a valid vector (NaN, zero, shape)."""

    code = "inference_error"
