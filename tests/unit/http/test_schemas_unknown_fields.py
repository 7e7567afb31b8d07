"""Unknown request fields in the request models: skipped unbuilt, and no other field taken
by their schemas (the refusal itself, `fields.refuse_unknown_fields`: test_fields.py)."""

from __future__ import annotations

import json

from siglip_text.http.schemas import OpenAICompatEmbeddingRequest, TokenizeRequest


def test_unknown_fields_are_skipped_by_the_model_never_built() -> None:
    body = json.dumps({"input": "a cat", "user": "u-1", "extra": [[[]] * 100] * 100})
    request = OpenAICompatEmbeddingRequest.model_validate_json(body)
    assert request.input == "a cat"
    assert request.model_extra is None  # nothing of "extra" was built


def test_the_schemas_tell_clients_no_other_field_is_taken() -> None:
    for model in (OpenAICompatEmbeddingRequest, TokenizeRequest):
        assert model.model_json_schema()["additionalProperties"] is False
