"""OpenAI's rule for request fields: a field the endpoint does not define is a 400 that names
it and says what to do; ``user`` and ``input_type`` are accepted without effect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from siglip_text.engine.service import EmbeddingService

from devkit.aws_lambda import LambdaContext, built_lambda, lambda_answer, load_event
from devkit.openai_shapes import assert_openai_error


def refused(response: Any) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    body = response.json()
    assert_openai_error(body)
    assert body["error"]["type"] == "invalid_request_error"
    error: dict[str, Any] = body["error"]
    return error


@pytest.mark.parametrize(
    ("field", "value", "advice"),
    [
        ("normalize", False, "always L2-normalized"),
        ("truncate_prompt_tokens", 4, "'truncate'"),
        ("embed_dtype", "int8", "'encoding_format'"),
        ("no_such_field", 1, "'input'"),
    ],
)
def test_a_field_this_api_does_not_define_is_a_400_naming_it_and_the_fix(
    client: TestClient, field: str, value: Any, advice: str
) -> None:
    # GIVEN a request written for another server (vLLM's fields) or with an invented field
    # WHEN it is sent
    response = client.post("/v1/embeddings", json={"input": "a cat", field: value})
    # THEN it is refused with OpenAI's message, naming the field and what to send instead
    error = refused(response)
    assert error["param"] == field
    assert error["message"].startswith(f"Unrecognized request argument supplied: {field}.")
    assert advice in error["message"]


def test_several_unknown_fields_are_all_named(client: TestClient) -> None:
    body = {"input": "a cat", "normalize": True, "embed_dtype": "float32"}
    error = refused(client.post("/v1/embeddings", json=body))
    assert "arguments supplied: normalize, embed_dtype" in error["message"]


def test_user_and_input_type_are_accepted_and_change_nothing(
    client: TestClient, service: EmbeddingService
) -> None:
    plain = client.post("/v1/embeddings", json={"input": "a cat"}).json()
    for extra in ({"user": "u-1"}, {"input_type": "query"}, {"input_type": "passage"}):
        response = client.post("/v1/embeddings", json={"input": "a cat", **extra})
        assert response.status_code == 200, response.text
        assert np.array_equal(
            response.json()["data"][0]["embedding"], plain["data"][0]["embedding"]
        )


def test_tokenize_refuses_fields_it_does_not_define_too(client: TestClient) -> None:
    error = refused(client.post("/tokenize", json={"inputs": "a cat", "prompt_name": "query"}))
    assert error["param"] == "prompt_name"
    assert "no named prompts" in error["message"]
    ok = client.post("/tokenize", json={"inputs": "a cat", "add_special_tokens": False})
    assert ok.status_code == 200


def test_an_unknown_field_is_refused_through_the_lambda_handler(demo_dir: Path) -> None:
    event = load_event("url-embeddings-text.json")
    event["body"] = json.dumps({"input": "a cat", "normalize": False})
    with built_lambda(demo_dir) as module:
        status, _, body = lambda_answer(module.handler(event, LambdaContext()))
    assert status == 400
    assert json.loads(body)["error"]["param"] == "normalize"
