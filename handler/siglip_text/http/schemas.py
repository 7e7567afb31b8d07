"""OpenAI-compatible request, response and error shapes, and the vector encodings.

Named after the protocol (OpenAI's ``CreateEmbeddingRequest`` / ``CreateEmbeddingResponse``).
Response bodies are serialized here straight to bytes with orjson, which writes float32
arrays directly in their shortest round-trip form: much faster than ``json.dumps`` of
``tolist()`` and smaller, with the same float32 values after parsing (docs/performance.md).
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

EncodingFormat = Literal["float", "base64"]
# Each array stops at its first bad item (fail_fast): the union tries every form, and an
# array of wrong items otherwise produces one error per item per form, whose time and
# memory grow with the body, before the 400.
TokenIds = Annotated[list[StrictInt], Field(fail_fast=True)]
Texts = Annotated[list[StrictStr], Field(fail_fast=True)]
TokenIdLists = Annotated[list[TokenIds], Field(fail_fast=True)]


class OpenAICompatEmbeddingRequest(BaseModel):
    """``POST /v1/embeddings``. ``user`` and unknown fields are accepted and ignored."""

    # "ignore", not "allow": unknown fields are skipped by the parser, never built into objects
    # (a large unknown field of nested arrays would become that many Python objects).
    model_config = ConfigDict(extra="ignore", title="CreateEmbeddingRequest")

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
    user: StrictStr | None = None


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


def error_body(message: str, *, type: str, param: str | None, code: str | None) -> dict[str, Any]:
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
    payloads: list[Any] = (
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
