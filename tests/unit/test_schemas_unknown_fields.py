"""Unknown request fields: the request models skip them unbuilt, and `errors.unknown_fields`
names them (the endpoints refuse them from the body's keys alone)."""

from __future__ import annotations

import json

from siglip_text.http.errors import UnknownFieldError, unknown_fields
from siglip_text.http.schemas import OpenAICompatEmbeddingRequest, TokenizeRequest


def test_unknown_fields_are_skipped_by_the_model_never_built() -> None:
    body = json.dumps({"input": "a cat", "user": "u-1", "extra": [[[]] * 100] * 100})
    request = OpenAICompatEmbeddingRequest.model_validate_json(body)
    assert request.input == "a cat"
    assert request.model_extra is None  # nothing of "extra" was built


def test_unknown_fields_names_the_first_and_lists_the_known_ones() -> None:
    known = OpenAICompatEmbeddingRequest.model_fields
    assert unknown_fields({"input": "x", "user": "u", "input_type": "query"}, known, {}) is None
    error = unknown_fields({"input": "x", "colour": 1}, known, {})
    assert isinstance(error, UnknownFieldError) and error.param == "colour"
    assert "'truncate'" in error.message and "'input_type'" in error.message


def test_an_unknown_name_is_escaped_and_shortened_in_the_answer() -> None:
    error = unknown_fields({"inputs": "x", "\n" * 500: 1}, TokenizeRequest.model_fields, {})
    assert error is not None and error.param is not None
    assert "\n" not in error.message and len(error.param) <= 40


def test_the_schemas_tell_clients_no_other_field_is_taken() -> None:
    for model in (OpenAICompatEmbeddingRequest, TokenizeRequest):
        assert model.model_json_schema()["additionalProperties"] is False
