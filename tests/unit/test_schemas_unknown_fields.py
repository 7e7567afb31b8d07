"""Unknown request fields are accepted and skipped by the parser, never built into objects."""

from __future__ import annotations

import json

from siglip_text.http.schemas import OpenAICompatEmbeddingRequest


def test_unknown_fields_are_accepted_but_not_kept() -> None:
    body = json.dumps({"input": "a cat", "user": "u-1", "extra": [[[]] * 100] * 100})
    request = OpenAICompatEmbeddingRequest.model_validate_json(body)
    assert request.input == "a cat"
    assert request.model_extra is None  # nothing of "user" or "extra" was built
