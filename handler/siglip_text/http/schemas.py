"""OpenAI-compatible request, response and error shapes, and the vector encodings.

Named after the protocol (OpenAI's ``CreateEmbeddingRequest`` / ``CreateEmbeddingResponse``).
Response bodies are serialized here straight to bytes with orjson, which writes float32
arrays directly in their shortest round-trip form: much faster than ``json.dumps`` of
``tolist()`` and smaller, with the same float32 values after parsing (docs/performance.md).

The request's bounds are OpenAI's own (its API reference, "Create embeddings": at most 8192
tokens per input and 300,000 summed across a request's inputs), so every request an OpenAI
client sends fits them, and `json_items` bounds what a body may make before it is parsed.
"""

from __future__ import annotations

import base64
from typing import Annotated, Literal

import numpy as np
import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
)

from ..engine.errors import InvalidInputError
from ..engine.json_value import JSONObject, JSONValue
from ..settings import MAX_INPUTS_CEILING
from .count import structure_outside_strings

EncodingFormat = Literal["float", "base64"]
#: Token ids per input (OpenAI's limit per input; this model reads the first 64).
MAX_TOKEN_IDS_PER_INPUT = 8192
#: Token ids per request, summed over its inputs (OpenAI's limit per request).
MAX_TOKEN_IDS_PER_REQUEST = 300_000
# Each array stops at its first bad item (fail_fast) and at its bound (max_length) before
# its items are validated: the union tries every form, and an array of wrong items otherwise
# produces one error per item per form, whose time and memory grow with the body.
TokenIds = Annotated[list[StrictInt], Field(fail_fast=True, max_length=MAX_TOKEN_IDS_PER_INPUT)]
Texts = Annotated[list[StrictStr], Field(fail_fast=True, max_length=MAX_INPUTS_CEILING)]
TokenIdLists = Annotated[list[TokenIds], Field(fail_fast=True, max_length=MAX_INPUTS_CEILING)]


def json_items(body: bytes) -> int:
    """At least as many as the values a JSON body holds (array items, object members), from
    its bytes, before anything is parsed (parsing makes a Python object of each): the
    separators and containers outside its strings, plus one. Its memory is a few MiB
    whatever the body (`count.structure_outside_strings`): no object per value or string."""
    return structure_outside_strings(body) + 1


def json_value(body: bytes) -> JSONValue:
    """A request body's JSON value, parsed by orjson (a compact parse, not pydantic's tree of
    every value); `InvalidInputError` (a 400 that does not echo the body) when it is empty or
    not JSON."""
    if not body or body.isspace():
        raise InvalidInputError("the request body is empty; send a JSON object")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in exc.msg:
            raise InvalidInputError("the request body is nested too deeply") from None
        where = f"line {exc.lineno} column {exc.colno}"
        raise InvalidInputError(
            f"the request body is not valid JSON (UTF-8): {exc.msg} at {where}"
        ) from None


def json_items_at_most(body: bytes, limit: int) -> bool:
    """Whether the body holds at most ``limit`` values (`json_items`), counting cheaply first:
    separators inside strings count too, so only a body over ``limit`` is scanned again with
    its strings removed."""
    return _structure(body) <= limit or json_items(body) <= limit


def _structure(body: bytes) -> int:
    return body.count(b",") + body.count(b"[") + body.count(b"{") + 1


#: NVIDIA NIM's ``truncate`` values this server takes, and the boolean each means: "END" cuts
#: the end (the contract's cut: the first tokens and <eos>), "NONE" refuses a long input.
NIM_TRUNCATE = {"END": True, "NONE": False}


class OpenAICompatEmbeddingRequest(BaseModel):
    """``POST /v1/embeddings``. A field not defined here is refused (400, `embeddings`);
    ``user`` and ``input_type`` are accepted without effect (docs/api.md)."""

    # "ignore", not "allow": the parser skips an unknown field's value, never builds it into
    # objects; the endpoint refuses unknown fields from the body's keys before validating.
    model_config = ConfigDict(
        extra="ignore",
        title="CreateEmbeddingRequest",
        json_schema_extra={"additionalProperties": False},
    )

    input: StrictStr | Texts | TokenIds | TokenIdLists = Field(
        description="A string, an array of strings, an array of token ids, or an array of "
        "arrays of token ids (ids of this model's own tokenizer, not tiktoken's)."
    )
    model: StrictStr | None = Field(default=None, description="Must equal the served model id.")
    encoding_format: EncodingFormat | None = Field(
        default=None, description="`float` (default) or `base64` (little-endian float32)."
    )
    dimensions: StrictInt | None = Field(
        default=None, description="May only equal the model's native embedding dimension."
    )
    user: StrictStr | None = Field(
        default=None, description="OpenAI's end-user id: accepted, without effect (not logged)."
    )
    input_type: StrictStr | None = Field(
        default=None,
        description="NVIDIA NIM's `query` / `passage` (sent by semantic-router's NimEncoder): "
        "accepted, without effect; SigLIP has one text tower for both.",
    )
    truncate: StrictBool | Literal["END", "NONE"] = Field(
        default=True,
        description="text-embeddings-inference's flag: true (default) embeds an input's first "
        "tokens when it is longer than the model's limit; false refuses it (400, `param` names "
        "the input). NVIDIA NIM's values (sent by langchain-nvidia-ai-endpoints): `END` as "
        "true, `NONE` as false; `START` (keep the last tokens) is refused.",
    )

    @field_validator("truncate", mode="before")
    @classmethod
    def _nim_truncate(cls, value: JSONValue) -> JSONValue:
        """NIM's values in any case; anything else is refused naming the accepted values
        (NIM's ``START`` keeps an input's last tokens: never this model's contract)."""
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.upper() in NIM_TRUNCATE:
            return value.upper()
        raise ValueError(
            'must be true, false, "END" (as true: an input\'s first tokens are embedded) or '
            '"NONE" (as false: a longer input is refused); "START" is not offered: '
            "this model embeds an input's first tokens and <eos>, as it was trained"
        )

    @property
    def truncates(self) -> bool:
        """Whether an input over the model's limit is cut (True) or refused (False)."""
        return NIM_TRUNCATE[self.truncate] if isinstance(self.truncate, str) else self.truncate


class TokenizeRequest(BaseModel):
    """``POST /tokenize``, text-embeddings-inference's request; a field not defined here is
    refused (400), as on ``/v1/embeddings``."""

    model_config = ConfigDict(
        extra="ignore", title="TokenizeRequest", json_schema_extra={"additionalProperties": False}
    )

    inputs: StrictStr | Texts = Field(description="A string or an array of strings.")
    add_special_tokens: StrictBool = Field(
        default=True, description="List the closing <eos> the model is fed (default true)."
    )


class EmbeddingObject(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class Usage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class OpenAICompatEmbeddingResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[EmbeddingObject]
    model: str
    usage: Usage


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


def error_body(message: str, *, type: str, param: str | None, code: str | None) -> JSONObject:
    """OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def encode_base64(vectors: np.ndarray) -> list[str]:
    """Each row as base64 of little-endian float32 bytes (what openai-python decodes)."""
    raw = np.ascontiguousarray(vectors, dtype="<f4").tobytes()
    row = vectors.shape[1] * 4
    return [base64.b64encode(raw[i : i + row]).decode("ascii") for i in range(0, len(raw), row)]


def embeddings_response(
    vectors: np.ndarray,
    *,
    model: str,
    prompt_tokens: int,
    encoding_format: EncodingFormat,
) -> bytes:
    """The ``CreateEmbeddingResponse`` JSON body, data in input order."""
    payloads: list[JSONValue] = (
        encode_base64(vectors)
        if encoding_format == "base64"
        else list(np.ascontiguousarray(vectors, dtype=np.float32))
    )
    body = {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": payload}
            for i, payload in enumerate(payloads)
        ],
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }
    return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
