"""What a newcomer meets on a first try: token-id inputs, JSON typos, wrong URLs, /docs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from siglip_text.engine.errors import ConfigError
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.settings import Settings, load_settings

from devkit.openai_shapes import assert_openai_error

URL = "/v1/embeddings"
CL100K_IDS = [[64, 2579, 2565]]  # what LangChain sends for "a red block" by default


@pytest.fixture(scope="module")
def rejecting(service: EmbeddingService, settings: Settings) -> Iterator[TestClient]:
    strict = settings.model_copy(update={"token_id_inputs": "reject"})
    with TestClient(create_app(service, strict)) as client:
        yield client


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert_openai_error(body)
    return body["error"]


def test_token_id_inputs_setting_defaults_to_reject_and_refuses_other_values() -> None:
    assert load_settings().token_id_inputs == "reject"
    assert load_settings(token_id_inputs="accept").token_id_inputs == "accept"
    with pytest.raises(ConfigError, match="SIGLIP_TOKEN_ID_INPUTS"):
        load_settings(token_id_inputs="sometimes")


@pytest.mark.parametrize("ids", [CL100K_IDS, CL100K_IDS[0], [[5, 6], [7]]])
def test_reject_refuses_any_token_id_input_naming_the_langchain_fix(
    rejecting: TestClient, ids: list
) -> None:
    error = error_of(rejecting.post(URL, json={"input": ids}), 400)
    assert error["code"] == "token_ids_rejected" and error["param"] == "input"
    assert "SIGLIP_TOKEN_ID_INPUTS=reject" in error["message"]
    assert "check_embedding_ctx_length=False" in error["message"]


def test_reject_still_embeds_text(rejecting: TestClient) -> None:
    response = rejecting.post(URL, json={"input": ["a red block"], "encoding_format": "float"})
    assert response.status_code == 200
    assert len(response.json()["data"][0]["embedding"]) == 32


def test_accept_embeds_in_vocabulary_ids(client: TestClient) -> None:
    response = client.post(URL, json={"input": [[64, 1]], "encoding_format": "float"})
    assert response.status_code == 200


def test_accept_names_the_likely_cause_of_an_out_of_vocabulary_id(client: TestClient) -> None:
    error = error_of(client.post(URL, json={"input": CL100K_IDS}), 400)
    assert "token id 2579 outside the vocabulary" in error["message"]
    assert "check_embedding_ctx_length=False" in error["message"]
    assert "tiktoken" in error["message"]


def test_json_syntax_error_says_line_and_column(client: TestClient) -> None:
    body = b'{\n  "input": ["a red block",]\n}'
    error = error_of(
        client.post(URL, content=body, headers={"content-type": "application/json"}), 400
    )
    assert "line 2 column 26" in error["message"], error["message"]  # the trailing ","
    assert "a red block" not in error["message"]  # the input is never echoed


def test_unknown_route_lists_the_routes_that_exist(client: TestClient) -> None:
    error = error_of(client.post("/v1/embedding", json={"input": "x"}), 404)
    for route in ("POST /v1/embeddings", "GET /v1/models", "GET /health"):
        assert route in error["message"]
    assert error["code"] == "not_found"


def test_docs_are_off_so_nothing_loads_from_a_cdn(client: TestClient) -> None:
    for path in ("/docs", "/redoc"):
        assert client.get(path).status_code == 404
    assert client.get("/openapi.json").json()["paths"]["/v1/embeddings"]
