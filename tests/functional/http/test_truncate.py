"""``truncate`` on ``POST /v1/embeddings`` (text-embeddings-inference's flag; default true):
false refuses an input over the contract's length with a 400 in OpenAI's shape whose
``param`` names the input and whose message gives its token count and the limit; true cuts
it, and the cut inputs are counted (the ``TruncatedInputs`` metric), never their text.
Through the app, the Lambda handler with events, `serve` and the openai client."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from openai import BadRequestError, OpenAI
from siglip_text.engine.service import EmbeddingService
from siglip_text.engine.tokenization import COUNT_CHARS
from siglip_text.http.app import create_app
from siglip_text.settings import load_service, load_settings

from devkit.aws_lambda import LambdaContext, lambda_answer, load_event
from devkit.openai_shapes import assert_openai_error, assert_openai_response

SHORT = "a photo of a cat"
LONG = "zebra-secret a red block and a robot arm on the kitchen table " * 12


def embed(client: Any, inputs: Any, **fields: Any) -> Any:
    return client.post("/v1/embeddings", json={"input": inputs, **fields})


def assert_refused(response: Any, *, index: int, tokens: int) -> None:
    assert response.status_code == 400, response.text
    body = response.json()
    assert_openai_error(body)
    error = body["error"]
    assert error["param"] == f"input[{index}]"
    assert error["code"] == "context_length_exceeded"
    assert f"has {tokens} tokens" in error["message"] and "limit of 64" in error["message"]
    assert "zebra-secret" not in error["message"]


def test_the_default_and_true_cut_a_long_text(
    client: TestClient, service: EmbeddingService
) -> None:
    expected = service.embed_texts([SHORT, LONG]).vectors
    for fields in ({}, {"truncate": True}):
        response = embed(client, [SHORT, LONG], **fields)
        assert response.status_code == 200
        body = response.json()
        assert_openai_response(body)
        np.testing.assert_allclose([d["embedding"] for d in body["data"]], expected, atol=1e-6)
        lengths = service.tokenizer.encode_texts([SHORT, LONG]).lengths
        assert lengths[1] == 64 and body["usage"]["prompt_tokens"] == sum(lengths)


def test_false_refuses_the_first_text_over_the_limit_with_its_count(
    client: TestClient, service: EmbeddingService
) -> None:
    count, exact = service.tokenizer.count_tokens(LONG)
    assert exact and count > 64
    assert_refused(embed(client, [SHORT, LONG, LONG], truncate=False), index=1, tokens=count)


def test_false_embeds_what_fits_to_the_last_token(
    client: TestClient, service: EmbeddingService
) -> None:
    fits = "a photo " * 31  # 63 content tokens and <eos>: the whole length, nothing cut
    assert service.tokenizer.count_tokens(fits) == (64, True)
    response = embed(client, [SHORT, fits], truncate=False)
    assert response.status_code == 200
    assert_openai_response(response.json())
    longer = "a photo " * 32
    count, _ = service.tokenizer.count_tokens(longer)
    assert count > 64
    assert_refused(embed(client, [longer], truncate=False), index=0, tokens=count)


def test_false_refuses_token_ids_over_the_limit(client: TestClient) -> None:
    response = embed(client, [[300] * 10, [300] * 65], truncate=False)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "input[1]"
    assert "has 65 token ids" in response.json()["error"]["message"]
    assert embed(client, [[300] * 65]).status_code == 200


def test_a_huge_text_is_counted_in_a_prefix(client: TestClient) -> None:
    huge = "word " * (COUNT_CHARS // 2)
    response = embed(client, huge, truncate=False)
    assert response.status_code == 400
    assert f"in its first {COUNT_CHARS} characters alone" in response.json()["error"]["message"]


def test_a_cached_text_is_refused_as_the_first_time(demo_dir: Path) -> None:
    settings = load_settings(model_dir=demo_dir, ort_intra_op_threads=1, cache_size=8)
    with TestClient(create_app(load_service(settings), settings)) as client:
        assert embed(client, [LONG]).status_code == 200  # cut, and cached
        refused = embed(client, [SHORT, LONG], truncate=False)
    assert refused.json()["error"]["param"] == "input[1]"


def test_truncate_must_be_a_boolean(client: TestClient) -> None:
    response = embed(client, SHORT, truncate="no")
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "truncate"


@pytest.mark.parametrize(
    "name", ["rest-embeddings-text.json", "http-embeddings-text.json", "url-embeddings-text.json"]
)
def test_both_ways_through_the_lambda_handler(
    lambda_module: ModuleType, service: EmbeddingService, name: str, capsys: Any
) -> None:
    event = load_event(name)
    capsys.readouterr()
    event["body"] = json.dumps({"input": [SHORT, LONG, LONG]})
    status, _, body = lambda_answer(lambda_module.handler(event, LambdaContext()))
    assert status == 200
    assert_openai_response(json.loads(body))
    # the metric counts the two cut inputs, and never carries their text
    metrics = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    assert [m["TruncatedInputs"] for m in metrics if "TruncatedInputs" in m] in ([2], [[2]])
    assert "zebra-secret" not in json.dumps(metrics)
    event["body"] = json.dumps({"input": [SHORT, LONG], "truncate": False})
    status, _, body = lambda_answer(lambda_module.handler(event, LambdaContext()))
    count, _ = service.tokenizer.count_tokens(LONG)
    assert_refused(_Answer(status, json.loads(body)), index=1, tokens=count)


class _Answer:
    def __init__(self, status: int, body: Any) -> None:
        self.status_code, self._body, self.text = status, body, json.dumps(body)

    def json(self) -> Any:
        return self._body


def test_both_ways_through_serve(live_server: str, service: EmbeddingService) -> None:
    url = f"{live_server}/v1/embeddings"
    assert httpx.post(url, json={"input": [SHORT, LONG]}).status_code == 200
    count, _ = service.tokenizer.count_tokens(LONG)
    refused = httpx.post(url, json={"input": [SHORT, LONG], "truncate": False})
    assert_refused(refused, index=1, tokens=count)


def test_the_openai_client_sends_it_in_extra_body(
    live_server: str, service: EmbeddingService
) -> None:
    client = OpenAI(base_url=f"{live_server}/v1", api_key="not-used", max_retries=0)
    with pytest.raises(BadRequestError) as refused:
        client.embeddings.create(
            model=service.model_id, input=[SHORT, LONG], extra_body={"truncate": False}
        )
    assert refused.value.body["param"] == "input[1]"  # type: ignore[index]
    cut = client.embeddings.create(
        model=service.model_id, input=[SHORT, LONG], extra_body={"truncate": True}
    )
    assert len(cut.data) == 2
