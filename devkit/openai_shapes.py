"""Validate bodies against OpenAI's own published schema (tests/fixtures, from shared/)."""

from __future__ import annotations

import base64
import json
from functools import cache
from typing import Any

import numpy as np
from jsonschema import Draft202012Validator

from devkit.paths import FIXTURES

SCHEMA_PATH = FIXTURES / "openai-embeddings-schema.json"


@cache
def _validator(component: str) -> Draft202012Validator:
    document = json.loads(SCHEMA_PATH.read_text())
    schema = {**document, "$ref": f"#/components/schemas/{component}"}
    return Draft202012Validator(schema)


def assert_openai_response(body: dict[str, Any]) -> None:
    """A CreateEmbeddingResponse; base64 strings are checked as decoded float arrays."""
    decoded = json.loads(json.dumps(body))
    for item in decoded.get("data", []):
        if isinstance(item.get("embedding"), str):
            item["embedding"] = decode_base64(item["embedding"]).tolist()
    _validator("CreateEmbeddingResponse").validate(decoded)


def assert_openai_error(body: dict[str, Any]) -> None:
    _validator("ErrorResponse").validate(body)
    assert set(body["error"]) == {"message", "type", "param", "code"}


def assert_openai_request(body: dict[str, Any]) -> None:
    _validator("CreateEmbeddingRequest").validate(body)


def decode_base64(text: str) -> np.ndarray:
    """Exactly what openai-python does."""
    return np.frombuffer(base64.b64decode(text), dtype="float32")
