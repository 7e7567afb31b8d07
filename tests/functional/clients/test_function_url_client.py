"""The official openai client, unchanged, through a function URL's events to the real handler.

devkit/function_url.py turns each HTTP request into the event a function URL sends and
the handler's answer back into HTTP: the client's own requests (base64 by default, its headers,
its Bearer key) take the path they take behind `Frontend=function-url`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import numpy as np
import pytest
from aws_lambda_powertools.utilities.parser.models import LambdaFunctionUrlModel
from openai import NotFoundError, OpenAI

from devkit.aws_lambda import LambdaContext, built_lambda
from devkit.function_url import HOST, event_for, transport
from devkit.openai_shapes import assert_openai_error


@pytest.fixture(scope="module")
def lambda_module(demo_dir: Path) -> Iterator[ModuleType]:
    with built_lambda(demo_dir) as module:
        yield module


@pytest.fixture
def events() -> list[dict[str, Any]]:
    return []


@pytest.fixture
def client(lambda_module: ModuleType, events: list[dict[str, Any]]) -> OpenAI:
    http = httpx.Client(transport=transport(lambda_module.handler, LambdaContext(), events=events))
    return OpenAI(
        base_url=f"https://{HOST}/v1", api_key="sk-not-checked", max_retries=0, http_client=http
    )


def test_default_embeddings_request_through_the_function_url_gives_the_models_vectors(
    client: OpenAI, lambda_module: ModuleType, events: list[dict[str, Any]]
) -> None:
    service = lambda_module.parts.service
    texts = ["a red block", "a robot arm"]
    # WHEN the client asks as it does by default (encoding_format=base64)
    response = client.embeddings.create(model=service.model_id, input=texts)
    # THEN it decodes the vectors of the model, in order
    got = np.array([item.embedding for item in response.data], dtype=np.float32)
    np.testing.assert_allclose(got, service.embed_texts(texts).vectors, atol=1e-6)
    # AND the function received one function URL event carrying the client's request
    (event,) = events
    LambdaFunctionUrlModel(**event)
    assert (event["routeKey"], event["rawPath"]) == ("$default", "/v1/embeddings")
    assert event["headers"]["authorization"] == "Bearer sk-not-checked"
    assert json.loads(event["body"])["encoding_format"] == "base64"


def test_models_and_errors_keep_openais_shape_through_the_function_url(
    client: OpenAI, lambda_module: ModuleType
) -> None:
    service = lambda_module.parts.service
    assert [m.id for m in client.models.list().data] == [service.model_id]
    with pytest.raises(NotFoundError) as caught:
        client.embeddings.create(model="text-embedding-3-small", input="x")
    assert caught.value.code == "model_not_found"


def test_every_path_reaches_the_function_which_answers_unknown_ones_itself(
    lambda_module: ModuleType,
) -> None:
    # A function URL has no routes: what API Gateway answered (404), the function answers.
    http = httpx.Client(transport=transport(lambda_module.handler, LambdaContext()))
    for method, path, status in (("GET", "/v1/nope", 404), ("GET", "/v1/embeddings", 405)):
        answer = http.request(method, f"https://{HOST}{path}")
        assert answer.status_code == status
        assert_openai_error(answer.json())


def test_a_binary_content_type_arrives_base64_encoded_and_is_served(
    lambda_module: ModuleType,
) -> None:
    # curl --data-binary with application/octet-stream: the URL base64-encodes the body
    http = httpx.Client(transport=transport(lambda_module.handler, LambdaContext()))
    body = json.dumps({"input": "a photo of a cat", "encoding_format": "float"}).encode()
    request = http.build_request(
        "POST",
        f"https://{HOST}/v1/embeddings",
        content=body,
        headers={"content-type": "application/octet-stream"},
    )
    event = event_for(request)
    assert event["isBase64Encoded"] is True and base64.b64decode(event["body"]) == body
    answer = http.send(request)
    assert answer.status_code == 200
    expected = lambda_module.parts.service.embed_texts(["a photo of a cat"]).vectors[0]
    np.testing.assert_allclose(answer.json()["data"][0]["embedding"], expected, atol=1e-6)
    # a JSON body is passed as text
    assert (
        event_for(http.build_request("POST", request.url, json={"input": "x"}))["isBase64Encoded"]
        is False
    )


def test_empty_and_special_token_texts_through_the_function_url(
    client: OpenAI, lambda_module: ModuleType
) -> None:
    # The empty string is a text (<eos> then pads); "<eos>" typed in a query is text too
    service = lambda_module.parts.service
    texts = ["", "<eos>", "a <pad> b"]
    response = client.embeddings.create(model=service.model_id, input=texts)
    got = np.array([item.embedding for item in response.data], dtype=np.float32)
    np.testing.assert_allclose(got, service.embed_texts(texts).vectors, atol=1e-6)
    eos = service.tokenizer.eos_id
    np.testing.assert_allclose(got[0], service.embed_token_ids([[eos]]).vectors[0], atol=1e-6)
    assert response.usage.prompt_tokens == sum(service.tokenizer.encode_texts(texts).lengths)
    assert float(got[0] @ got[1]) < 0.9999  # "<eos>" is not the empty query
