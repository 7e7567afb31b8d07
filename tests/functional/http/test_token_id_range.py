"""Token ids outside the vocabulary are a 400 wherever they stand in an input: past the
contract's 64 positions too, where the model never reads them (docs/api.md: an
out-of-vocabulary id means ids of another tokenizer). Through the app and the Lambda
handler with an API Gateway event."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fastapi.testclient import TestClient
from siglip_text.engine.service import EmbeddingService

from devkit.aws_lambda import LambdaContext, built_lambda, lambda_answer, load_event
from devkit.openai_shapes import assert_openai_error, assert_openai_response


def inputs_with(service: EmbeddingService, bad: int, position: int) -> list[list[int]]:
    """Two inputs of valid ids; the second holds ``bad`` at ``position``."""
    ids = [5] * 100
    ids[position] = bad
    return [[7, 8, 9], ids]


def assert_out_of_vocabulary(status: int, body: Any, service: EmbeddingService) -> None:
    assert status == 400, body
    assert_openai_error(body)
    assert body["error"]["param"] == "input"
    message = body["error"]["message"]
    assert "input[1]" in message
    assert f"outside the vocabulary [0, {service.tokenizer.vocab_size})" in message


@pytest.mark.parametrize("position", [0, 63, 64, 99])
@pytest.mark.parametrize("bad", [-1, 99_999_999])
def test_an_id_outside_the_vocabulary_is_a_400_at_any_position(
    client: TestClient, service: EmbeddingService, bad: int, position: int
) -> None:
    response = client.post("/v1/embeddings", json={"input": inputs_with(service, bad, position)})
    assert_out_of_vocabulary(response.status_code, response.json(), service)


def test_the_highest_id_past_the_cut_is_embedded(
    client: TestClient, service: EmbeddingService
) -> None:
    highest = service.tokenizer.vocab_size - 1
    response = client.post("/v1/embeddings", json={"input": inputs_with(service, highest, 99)})
    assert response.status_code == 200, response.text
    assert_openai_response(response.json())


@pytest.fixture(scope="module")
def lambda_module(demo_dir: Path) -> Iterator[ModuleType]:
    with built_lambda(demo_dir, SIGLIP_TOKEN_ID_INPUTS="accept") as module:
        yield module


def test_through_the_lambda_handler(lambda_module: ModuleType, service: EmbeddingService) -> None:
    event = load_event("http-embeddings-text.json")
    event["body"] = json.dumps({"input": inputs_with(service, 99_999_999, 64)})
    status, _, body = lambda_answer(lambda_module.handler(event, LambdaContext()))
    assert_out_of_vocabulary(status, json.loads(body), service)
