"""Token ids are refused by default, by `serve` and the Lambda function alike, with the message
that names the fix; ``SIGLIP_TOKEN_ID_INPUTS=accept`` takes them as the bundle's own ids.
Clients that tokenize with tiktoken (langchain-community's OpenAIEmbeddings, ragas' legacy
factory, langroid) would otherwise get HTTP 200 with another text's vector."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from siglip_text.engine.service import EmbeddingService
from siglip_text.settings import load_settings

from devkit.aws_lambda import LambdaContext, built_lambda, lambda_answer, load_event
from devkit.openai_shapes import assert_openai_error
from devkit.servers import demo_server

IDS = {"input": [[1, 2, 3]]}


def assert_refused(status: int, body: dict) -> None:
    assert status == 400, body
    assert_openai_error(body)
    error = body["error"]
    assert error["code"] == "token_ids_rejected" and error["param"] == "input"
    # the fix for the caller (send the text) and for the operator (the setting)
    assert "send the text" in error["message"]
    assert "check_embedding_ctx_length=False" in error["message"]
    assert "SIGLIP_TOKEN_ID_INPUTS=accept" in error["message"]


def test_the_default_is_reject() -> None:
    assert load_settings().token_id_inputs == "reject"


def test_serve_demo_refuses_token_ids_by_default(live_server: str) -> None:
    # GIVEN `siglip-text serve --demo` as started with no setting
    response = httpx.post(f"{live_server}/v1/embeddings", json=IDS)
    # THEN [[1, 2, 3]] is a 400 naming the fix; the same ids as text are not refused
    assert_refused(response.status_code, response.json())
    text = httpx.post(f"{live_server}/v1/embeddings", json={"input": ["1 2 3"]})
    assert text.status_code == 200


@pytest.mark.parametrize("name", ["rest-embeddings-text.json", "url-embeddings-text.json"])
def test_the_lambda_function_refuses_them_the_same(demo_dir: Path, name: str) -> None:
    event = load_event(name)
    event["body"], event["isBase64Encoded"] = json.dumps(IDS), False
    with built_lambda(demo_dir) as function:
        status, _, body = lambda_answer(function.handler(event, LambdaContext()))
    assert_refused(status, json.loads(body))


@pytest.fixture(scope="module")
def accepting() -> Iterator[str]:
    with demo_server(SIGLIP_TOKEN_ID_INPUTS="accept") as base:
        yield base


@pytest.mark.slow  # a second server subprocess
def test_serve_demo_embeds_them_under_the_setting(
    accepting: str, service: EmbeddingService
) -> None:
    # GIVEN `serve --demo` with SIGLIP_TOKEN_ID_INPUTS=accept
    response = httpx.post(f"{accepting}/v1/embeddings", json={**IDS, "encoding_format": "float"})
    # THEN [[1, 2, 3]] is embedded as the bundle's own ids, as given
    assert response.status_code == 200, response.text
    got = response.json()["data"][0]["embedding"]
    np.testing.assert_allclose(got, service.embed_token_ids([[1, 2, 3]]).vectors[0], atol=1e-6)
    # AND through the official openai client too (it sends base64)
    openai = pytest.importorskip("openai", reason="needs the openai client")
    client = openai.OpenAI(base_url=f"{accepting}/v1", api_key="not-used", max_retries=0)
    answer = client.embeddings.create(model=service.model_id, input=[[300, 301, 302]])
    np.testing.assert_allclose(
        answer.data[0].embedding, service.embed_token_ids([[300, 301, 302]]).vectors[0], atol=1e-6
    )
