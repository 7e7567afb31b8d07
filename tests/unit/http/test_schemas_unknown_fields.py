"""Unknown request fields: the request models skip them unbuilt, and
`fields.refuse_unknown_fields` refuses them, from the body's keys alone."""

from __future__ import annotations

import json
from typing import Any

import pytest
from siglip_text.http.errors import UnknownFieldError
from siglip_text.http.fields import refuse_unknown_fields
from siglip_text.http.schemas import OpenAICompatEmbeddingRequest, TokenizeRequest


def test_unknown_fields_are_skipped_by_the_model_never_built() -> None:
    body = json.dumps({"input": "a cat", "user": "u-1", "extra": [[[]] * 100] * 100})
    request = OpenAICompatEmbeddingRequest.model_validate_json(body)
    assert request.input == "a cat"
    assert request.model_extra is None  # nothing of "extra" was built


def refusal(data: Any, model: Any = OpenAICompatEmbeddingRequest) -> UnknownFieldError:
    with pytest.raises(UnknownFieldError) as refused:
        refuse_unknown_fields(data, model.model_fields, {})
    return refused.value


def test_an_unknown_field_is_named_and_the_known_ones_listed() -> None:
    known = OpenAICompatEmbeddingRequest.model_fields
    refuse_unknown_fields({"input": "x", "user": "u", "input_type": "query"}, known, {})
    refuse_unknown_fields(["not", "an", "object"], known, {})  # the schema refuses it
    error = refusal({"input": "x", "colour": 1})
    assert error.param == "colour"
    assert "'truncate'" in error.message and "'input_type'" in error.message


def test_an_unknown_name_is_escaped_and_shortened_in_the_answer() -> None:
    error = refusal({"inputs": "x", "\n" * 500: 1}, TokenizeRequest)
    assert error.param is not None
    assert "\n" not in error.message and len(error.param) <= 40


def test_the_schemas_tell_clients_no_other_field_is_taken() -> None:
    for model in (OpenAICompatEmbeddingRequest, TokenizeRequest):
        assert model.model_json_schema()["additionalProperties"] is False
