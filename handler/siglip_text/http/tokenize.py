"""``POST /tokenize``: what the model is fed for each text, in text-embeddings-inference's
shapes (its ``TokenizeRequest`` and ``TokenizeResponse``), FastAPI-free.

The request: ``inputs``, a string or an array of strings, and ``add_special_tokens``
(default true); any other field is refused (400 naming it), as on ``/v1/embeddings``. The
answer: for each input, in order, a list of token objects ``{"id", "text", "special",
"start", "stop"}``, taken after the lowercasing and the cut to the contract's length, so a
client sees where a long text ends: ``text`` is the input's characters ``start:stop``
(character offsets into the text as sent), and the closing ``<eos>`` (when
``add_special_tokens``) is special, with null offsets. Pads are not listed. Errors are
OpenAI's shape, like every other answer of this API.
"""

from __future__ import annotations

import json

import orjson
from pydantic import ValidationError

from ..engine.errors import InvalidInputError, TooManyInputsError
from ..engine.service import EmbeddingService
from ..engine.tokenization import Token
from .errors import ResponseTooLargeError
from .fields import refuse_unknown_fields
from .response_size import PROXY_ENVELOPE_BYTES
from .schemas import TokenizeRequest, json_items_at_most, json_value

INPUTS_SHAPE_MESSAGE = "'inputs' must be a string or an array of strings"
#: Values a ``/tokenize`` request may hold beyond its texts: its fields and the array (the
#: embeddings request, whose inputs may be arrays of ids, has its own,
#: `embeddings.EMBEDDINGS_ITEMS_SLACK`).
TOKENIZE_ITEMS_SLACK = 16
#: What to do instead, for text-embeddings-inference's own field this server does not define.
FIELD_ADVICE = {
    "prompt_name": "this model has no named prompts: put any prefix in the text itself",
}


def tokenize_body(
    service: EmbeddingService, body: bytes, *, max_inputs: int, response_limit: int | None
) -> bytes:
    """One ``/tokenize`` request's work: its body in, the answer's bytes out."""
    texts, add_special_tokens = parse_tokenize_request(body, max_inputs=max_inputs)
    tokens = service.tokenize(texts, add_special_tokens=add_special_tokens)
    return tokenize_response(tokens, limit=response_limit)


def parse_tokenize_request(body: bytes, *, max_inputs: int) -> tuple[list[str], bool]:
    """The texts and ``add_special_tokens`` of a ``/tokenize`` body; every failure is a 400
    (413 for too many inputs) that does not echo the input. As for embeddings, the body's
    values are counted before it is parsed, so memory is bounded by the inputs allowed."""
    if not json_items_at_most(body, max_inputs + TOKENIZE_ITEMS_SLACK):
        raise TooManyInputsError(
            f"the request holds more than {max_inputs + TOKENIZE_ITEMS_SLACK:,} values; at most "
            f"{max_inputs} inputs are accepted per request: split it",
            param="inputs",
        )
    data = json_value(body)
    refuse_unknown_fields(data, TokenizeRequest.model_fields, FIELD_ADVICE)
    try:
        request = TokenizeRequest.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        if errors[0]["type"] == "model_type":
            raise InvalidInputError("the request body must be a JSON object") from None
        fields = [str(e["loc"][0]) for e in errors if e["loc"]]
        if "inputs" in fields or not fields:
            missing = any(e["type"] == "missing" for e in errors if e["loc"] == ("inputs",))
            message = "'inputs' is required" if missing else INPUTS_SHAPE_MESSAGE
            raise InvalidInputError(message, param="inputs") from None
        field = fields[0]
        raise InvalidInputError(f"invalid '{field}': must be a boolean", param=field) from None
    texts = [request.inputs] if isinstance(request.inputs, str) else list(request.inputs)
    if not texts:
        raise InvalidInputError("'inputs' must not be an empty array", param="inputs")
    if len(texts) > max_inputs:
        raise TooManyInputsError(
            f"'inputs' has {len(texts)} items; at most {max_inputs} are accepted per request",
            param="inputs",
        )
    return texts, request.add_special_tokens


def tokenize_response(tokens: list[list[Token]], *, limit: int | None) -> bytes:
    """The ``TokenizeResponse`` body: one list of token objects per input. Over ``limit``
    bytes (the frontend's response limit, Lambda's 6 MB) it is a 413: split the request."""
    # orjson writes a dataclass as an object of its fields in order (id, text, special,
    # start, stop), with no dict per token in between.
    body = orjson.dumps(tokens)
    if limit is None:
        return body
    # As Lambda's proxy response carries it: a JSON string, non-ASCII escaped, in an envelope.
    size = len(json.dumps(body.decode("utf-8"))) + PROXY_ENVELOPE_BYTES
    if size > limit:
        raise ResponseTooLargeError(
            f"the answer would take {size} bytes, over this deployment's response limit of "
            f"{limit}; send fewer inputs per request"
        )
    return body
