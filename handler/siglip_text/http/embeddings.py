"""``POST /v1/embeddings``: the request's parsing and its rules, FastAPI-free (as `tokenize`
is for ``/tokenize``).

Parse (the body's size in values is bounded before orjson parses it, and the request
schema's bounds stop validation early), refuse fields the API does not define (OpenAI's
rule: `refuse_unknown_fields`), validate against the served model, check that the answer
fits the frontend, embed. `app.create_embeddings` runs `embed_body` in the running slot the
front admitted the request to.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from ..engine.errors import (
    FOREIGN_TOKEN_IDS_HINT,
    InferenceError,
    InvalidInputError,
    ModelNotFoundError,
    SiglipError,
    TokenIdInputsRejectedError,
    TooManyInputsError,
)
from ..engine.json_value import JSONValue
from ..engine.limits import Deadline
from ..engine.service import Embeddings, EmbeddingService, Inputs, TextInputs, TokenIdInputs
from ..settings import MAX_INPUTS_CEILING, Settings
from .errors import short
from .fields import refuse_unknown_fields
from .inputs_bound import InputsBound, derive_inputs_bound
from .response_size import check_response_fits
from .schemas import (
    MAX_TOKEN_IDS_PER_INPUT,
    MAX_TOKEN_IDS_PER_REQUEST,
    EncodingFormat,
    OpenAICompatEmbeddingRequest,
    embeddings_response,
    json_items_at_most,
    json_value,
)
from .unexpected import unexpected

logger = logging.getLogger("siglip_text.http.embeddings")

INPUT_SHAPE_MESSAGE = (
    "'input' must be a string, an array of strings, an array of token ids "
    "(integers), or an array of arrays of token ids"
)
#: Values a request may hold beyond its inputs and token ids: its fields, its containers.
EMBEDDINGS_ITEMS_SLACK = 64

#: What to do instead, for fields other servers define (vLLM, Infinity, Cohere-style clients):
#: each changes the answer there, so silently ignoring it would answer another question.
FIELD_ADVICE: Mapping[str, str] = {
    "normalize": "the vectors are always L2-normalized (unit length); remove 'normalize'",
    "truncate_prompt_tokens": (
        "this server keeps each input's first tokens up to the model's limit with "
        "'truncate': true (the default), or refuses a longer input with 'truncate': false; "
        "send 'truncate' instead"
    ),
    "embed_dtype": (
        "vectors are float32, sent as JSON numbers or as base64 of their bytes: choose with "
        "'encoding_format' ('float' or 'base64')"
    ),
}


def embed_body(
    service: EmbeddingService,
    settings: Settings,
    body: bytes,
    *,
    deadline: Deadline | None,
    response_limit: int | None,
    bound: InputsBound,
) -> tuple[bytes, int, Embeddings]:
    """One request's work: the answer's bytes, the number of inputs, what embedding cost.
    ``response_limit``: the largest answer the frontend returns (None: no limit);
    ``bound``: the most inputs a request may hold (inputs_bound.py)."""
    parsed = parse_request(body, max_inputs=bound.value)
    inputs = validate_request(parsed, service, settings, bound=bound)
    encoding: EncodingFormat = parsed.encoding_format or "float"
    check_response_fits(
        len(inputs.items),
        limit=response_limit,
        dimension=service.dimension,
        encoding=encoding,
        model=service.model_id,
        max_tokens=service.max_tokens,
    )
    if settings.log_inputs:
        # In the message itself: `serve`'s plain log format drops `extra` fields.
        logger.info("inputs: %s", [short(repr(i), 200) for i in inputs.items[:16]])
    try:
        result = service.embed(inputs, deadline, truncate=parsed.truncates)
        content = embeddings_response(
            result.vectors,
            model=service.model_id,
            prompt_tokens=result.prompt_tokens,
            encoding_format=encoding,
        )
    except SiglipError:
        raise
    except Exception as exc:  # a bug or a runtime fault: never echoed to the client
        raise InferenceError(f"unexpected error while embedding: {unexpected(exc)}") from exc
    return content, len(inputs.items), result


def items_limit(max_inputs: int) -> int:
    """The most values (`schemas.json_items`) a request with ``max_inputs`` inputs may hold:
    its texts or token ids, one array per input, and a few fields."""
    return MAX_TOKEN_IDS_PER_REQUEST + 2 * max_inputs + EMBEDDINGS_ITEMS_SLACK


def parse_request(body: bytes, *, max_inputs: int | None = None) -> OpenAICompatEmbeddingRequest:
    """JSON -> the request model; every failure is a 4xx that does not echo the input (a JSON
    syntax error says where: line and column).

    Memory is bounded before parsing: a body holding more values than a request with
    ``max_inputs`` inputs can (`items_limit`) is a 413 from a count of its bytes. orjson
    then makes the Python objects (a compact parse, not pydantic's JSON tree of every value)
    and the request schema's bounds stop validation at the first array too long.
    """
    if max_inputs is not None and not json_items_at_most(body, items_limit(max_inputs)):
        raise TooManyInputsError(
            f"the request holds more than {items_limit(max_inputs):,} values; at most "
            f"{max_inputs} inputs and {MAX_TOKEN_IDS_PER_REQUEST:,} token ids in all are "
            "accepted per request: split it",
            param="input",
        )
    data = json_value(body)
    refuse_unknown_fields(data, OpenAICompatEmbeddingRequest.model_fields, FIELD_ADVICE)
    try:
        return OpenAICompatEmbeddingRequest.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
    first = errors[0]
    if first["type"] == "model_type":
        raise InvalidInputError("the request body must be a JSON object") from None
    fields = [str(e["loc"][0]) for e in errors if e["loc"]]
    if "input" in fields or not fields:
        raise _input_error(data, errors, max_inputs) from None
    first = next(e for e in errors if e["loc"])
    field_name = str(first["loc"][0])
    # A field's own check (a validator's ValueError) names what it accepts: its words alone.
    message = str(first["msg"]).removeprefix("Value error, ")
    raise InvalidInputError(f"invalid '{field_name}': {message}", param=field_name) from None


def _input_error(
    data: JSONValue, errors: Sequence[ErrorDetails], max_inputs: int | None
) -> SiglipError:
    """The one error for an ``input`` that fits none of its forms."""
    if any(e["type"] == "missing" and e["loc"] == ("input",) for e in errors):
        return InvalidInputError("'input' is required", param="input")
    raw = data.get("input") if isinstance(data, dict) else None
    too_long = [e for e in errors if e["type"] == "too_long"]
    if too_long and isinstance(raw, list):
        if raw and isinstance(raw[0], int) and not isinstance(raw[0], bool):
            return InvalidInputError(
                f"'input' is one sequence of {len(raw)} token ids; at most "
                f"{MAX_TOKEN_IDS_PER_INPUT} are accepted per input",
                param="input",
            )
        long_item = next(
            (
                i
                for i, item in enumerate(raw)
                if isinstance(item, list) and len(item) > MAX_TOKEN_IDS_PER_INPUT
            ),
            None,
        )
        if long_item is not None:
            return InvalidInputError(
                f"input[{long_item}] has {len(raw[long_item])} token ids; at most "
                f"{MAX_TOKEN_IDS_PER_INPUT} are accepted per input",
                param="input",
            )
        most = max_inputs if max_inputs is not None else MAX_INPUTS_CEILING
        return TooManyInputsError(
            f"'input' has {len(raw)} items; at most {most} are accepted per request",
            param="input",
        )
    return InvalidInputError(INPUT_SHAPE_MESSAGE, param="input")


def validate_request(
    request: OpenAICompatEmbeddingRequest,
    service: EmbeddingService,
    settings: Settings,
    *,
    bound: InputsBound | None = None,
) -> Inputs:
    """Apply the served model's rules; return the inputs, tagged as texts or token ids.
    ``bound``: the most inputs (None: the settings' bound with no frontend in front)."""
    if bound is None:
        bound = derive_inputs_bound(service, settings, response_limit=None)
    if request.model is not None and request.model != service.model_id:
        raise ModelNotFoundError(
            f"The model '{short(request.model, 80)}' is not served here; this endpoint serves "
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
    if len(inputs.items) > bound.value:
        raise TooManyInputsError(bound.refusal(len(inputs.items)), param="input")
    if isinstance(inputs, TokenIdInputs) and settings.token_id_inputs == "reject":
        raise TokenIdInputsRejectedError(
            "'input' is token ids, refused here (SIGLIP_TOKEN_ID_INPUTS=reject): send the text. "
            f"{FOREIGN_TOKEN_IDS_HINT}. If callers use this bundle's tokenizer, set "
            "SIGLIP_TOKEN_ID_INPUTS=accept",
            param="input",
        )
    # An empty string is a text (<eos> then pads, as the training pipeline embeds it); an
    # empty token array has no token to feed.
    if not isinstance(inputs, TextInputs):
        for i, item in enumerate(inputs.items):
            if len(item) == 0:
                raise InvalidInputError(f"input[{i}] is an empty token array", param="input")
        total = sum(len(item) for item in inputs.items)
        if total > MAX_TOKEN_IDS_PER_REQUEST:
            raise TooManyInputsError(
                f"'input' holds {total} token ids; at most {MAX_TOKEN_IDS_PER_REQUEST:,} are "
                "accepted per request: split it",
                param="input",
            )
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
