"""``POST /tokenize`` (text-embeddings-inference's request and response shapes): the tokens
the model is fed, after lowercasing and the cut, against the contract's ids; authenticated
like ``/v1``; errors in OpenAI's shape. Through the app, the Lambda handler and `serve`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import httpx
import pytest
from aws_lambda_powertools.utilities.parameters import SecretsProvider
from fastapi.testclient import TestClient
from moto import mock_aws
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.http.auth import build_authenticator
from siglip_text.settings import Settings, load_settings
from tokenizers import Tokenizer

from devkit.aws_lambda import LambdaContext, lambda_answer, load_event
from devkit.edge_texts import SPECIAL_STRINGS
from devkit.openai_shapes import assert_openai_error

KEY = "sk-siglip-tokenize-test-key-0123456789"
LONG = "a red block and a robot arm on the kitchen table " * 30


def ids_of(tokens: list[dict[str, Any]], pad_to: int = 64) -> list[int]:
    ids = [t["id"] for t in tokens]
    return ids + [0] * (pad_to - len(ids))


def tokenize(client: Any, body: Any, **headers: str) -> Any:
    return client.post("/tokenize", json=body, headers=headers)


def test_each_reference_text_gets_the_contracts_ids(
    client: TestClient, reference: dict[str, Any]
) -> None:
    # GIVEN the demo's reference: Hugging Face's tokenizer on ordinary, empty, long and
    # Unicode texts (emoji, RTL, combining marks, controls), padded to 64
    cases = reference["cases"]
    texts = [case["text"] for case in cases]
    assert "" in texts and any(len(t) > 200 for t in texts) and "一只猫的照片" in texts
    # WHEN they are sent in one request
    response = tokenize(client, {"inputs": texts})
    # THEN each input's tokens are the contract's ids, <eos> last and special
    assert response.status_code == 200
    rows = response.json()
    assert len(rows) == len(cases)
    for case, row in zip(cases, rows, strict=True):
        assert ids_of(row) == case["input_ids"], case["text"]
        assert row[-1] == {"id": 1, "text": "<eos>", "special": True, "start": None, "stop": None}
        assert not any(t["special"] for t in row[:-1])


def test_each_tokens_text_is_the_piece_of_the_input_it_comes_from(client: TestClient) -> None:
    text = "A Kitten ON the Beach 🐱, café"
    (row,) = tokenize(client, {"inputs": text}).json()
    for token in row[:-1]:
        assert token["text"] == text[token["start"] : token["stop"]]
    # as sent (before lowercasing), while the ids are those of the lowercased text
    assert row[0]["text"] == "A"
    (lowered,) = tokenize(client, {"inputs": text.lower()}).json()
    assert [t["id"] for t in row] == [t["id"] for t in lowered]


def test_the_cut_is_visible_on_a_long_text(client: TestClient, service: EmbeddingService) -> None:
    (row,) = tokenize(client, {"inputs": LONG}).json()
    assert len(row) == 64  # 63 content tokens and <eos>
    cut_at = row[-2]["stop"]
    assert 0 < cut_at < len(LONG)
    assert ids_of(row) == service.tokenizer.encode_texts([LONG]).ids[0].tolist()
    assert LONG[:cut_at].endswith(row[-2]["text"])


def test_special_token_strings_are_tokenized_as_text(demo_dir: Path, client: TestClient) -> None:
    source = Tokenizer.from_file(str(demo_dir / "tokenizer.json"))
    source.no_padding()
    source.no_truncation()
    source.encode_special_tokens = True
    texts = [*SPECIAL_STRINGS, "a photo <eos> of a <pad> cat"]
    rows = tokenize(client, {"inputs": texts}).json()
    for text, row in zip(texts, rows, strict=True):
        content = [t["id"] for t in row[:-1]]
        assert {0, 1, 2, 3}.isdisjoint(content), text
        assert content == source.encode(text, add_special_tokens=False).ids[:63], text
        assert "".join(t["text"] for t in row[:-1]) == text[: row[-2]["stop"]]


def test_without_special_tokens_no_eos_is_listed(client: TestClient) -> None:
    with_eos, without = (
        tokenize(client, {"inputs": ["a cat", ""], "add_special_tokens": flag}).json()
        for flag in (True, False)
    )
    assert without == [row[:-1] for row in with_eos]
    assert without[1] == []


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"inputs": []}, 400, "inputs"),
        ({}, 400, "inputs"),
        ({"inputs": 5}, 400, "inputs"),
        ({"inputs": [["nested"]]}, 400, "inputs"),
        ({"inputs": "x", "add_special_tokens": "yes"}, 400, "add_special_tokens"),
        ({"inputs": ["x"] * 2049}, 413, "inputs"),
        ([], 400, None),
    ],
)
def test_bad_requests_get_openai_shaped_errors(
    client: TestClient, body: Any, status: int, param: str | None
) -> None:
    response = tokenize(client, body)
    assert response.status_code == status, response.text
    assert_openai_error(response.json())
    assert response.json()["error"]["param"] == param


def test_invalid_json_and_lone_surrogates_are_400(client: TestClient) -> None:
    for raw in (b'{"inputs": ["a",]}', b'{"inputs": "\\ud800 cat"}'):
        response = client.post(
            "/tokenize", content=raw, headers={"content-type": "application/json"}
        )
        assert response.status_code == 400
        assert_openai_error(response.json())
    assert "cat" not in response.json()["error"]["message"]


def test_the_route_is_in_the_openapi_schema(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/tokenize"]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    assert set(schema["properties"]) == {"inputs", "add_special_tokens"}


@pytest.fixture
def keyed_settings(demo_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """auth mode api-key, the key in a moto Secrets Manager (in process)."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        secrets = boto3.client("secretsmanager", region_name="us-east-1")
        arn = secrets.create_secret(Name="siglip-text/tokenize-key", SecretString=KEY)["ARN"]
        yield load_settings(
            model_dir=demo_dir,
            ort_intra_op_threads=1,
            auth_mode="api-key",
            api_key_secret_arn=arn,
        )


def test_it_takes_the_api_key_like_v1(service: EmbeddingService, keyed_settings: Settings) -> None:
    provider = SecretsProvider(boto3_client=boto3.client("secretsmanager", "us-east-1"))
    authenticator = build_authenticator(keyed_settings, provider=provider)
    client = TestClient(create_app(service, keyed_settings, authenticator=authenticator))
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        response = tokenize(client, {"inputs": "a cat"}, **headers)
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
        assert_openai_error(response.json())
    assert tokenize(client, {"inputs": "a cat"}, Authorization=f"Bearer {KEY}").status_code == 200


@pytest.mark.parametrize(
    "name", ["rest-embeddings-text.json", "http-embeddings-text.json", "url-embeddings-text.json"]
)
def test_through_the_lambda_handler(
    lambda_module: ModuleType, service: EmbeddingService, name: str
) -> None:
    event = load_event(name)
    event["body"] = json.dumps({"inputs": ["A Photo Of A Cat", LONG]})
    if event.get("version") == "2.0":
        event["rawPath"] = event["requestContext"]["http"]["path"] = "/tokenize"
    else:
        event["path"] = event["resource"] = event["requestContext"]["path"] = "/tokenize"
    status, _, body = lambda_answer(lambda_module.handler(event, LambdaContext()))
    assert status == 200, body
    rows = json.loads(body)
    expected = service.tokenizer.encode_texts(["A Photo Of A Cat", LONG]).ids.tolist()
    assert [ids_of(row) for row in rows] == expected


def test_through_serve(live_server: str, service: EmbeddingService) -> None:
    response = httpx.post(f"{live_server}/tokenize", json={"inputs": "A Photo Of A Cat"})
    assert response.status_code == 200
    (row,) = response.json()
    assert ids_of(row) == service.tokenizer.encode_texts(["a photo of a cat"]).ids[0].tolist()
    refused = httpx.post(
        f"{live_server}/tokenize", content=b"inputs=x", headers={"content-type": "text/plain"}
    )
    assert refused.status_code == 415
    assert_openai_error(refused.json())
