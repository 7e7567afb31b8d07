"""NVIDIA NIM's ``truncate`` values beside the boolean: "END" cuts a long input (the contract's
cut), "NONE" refuses it, "START" is a 400 naming the accepted values; and NVIDIA's own client,
`NVIDIAEmbeddings` (which sends ``"truncate": "NONE"`` and ``input_type`` on every request),
gets the right vectors from `serve --demo`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from siglip_text.engine.service import EmbeddingService

from devkit.openai_shapes import assert_openai_error

URL = "/v1/embeddings"
LONG = "a red block on a blue table " * 20  # well over 64 tokens
SHORT = "a red block"


def vectors(response: Any) -> np.ndarray:
    assert response.status_code == 200, response.text[:300]
    return np.array([item["embedding"] for item in response.json()["data"]], dtype=np.float32)


def embed(client: TestClient, truncate: Any, texts: list[str]) -> Any:
    body = {"input": texts, "encoding_format": "float", "truncate": truncate}
    return client.post(URL, json=body)


@pytest.mark.parametrize(("nim", "boolean"), [("END", True), ("end", True), ("NONE", False)])
def test_nims_values_do_what_the_boolean_does(client: TestClient, nim: str, boolean: bool) -> None:
    # THEN a short text is embedded the same under either spelling
    np.testing.assert_array_equal(
        vectors(embed(client, nim, [SHORT])), vectors(embed(client, boolean, [SHORT]))
    )
    # AND a long text is cut under END / true, refused under NONE / false, alike
    by_nim, by_boolean = embed(client, nim, [SHORT, LONG]), embed(client, boolean, [SHORT, LONG])
    if boolean:
        np.testing.assert_array_equal(vectors(by_nim), vectors(by_boolean))
    else:
        assert by_nim.status_code == by_boolean.status_code == 400
        assert by_nim.json() == by_boolean.json()
        assert by_nim.json()["error"]["code"] == "context_length_exceeded"
        assert by_nim.json()["error"]["param"] == "input[1]"


def test_end_is_the_contracts_cut(client: TestClient, service: EmbeddingService) -> None:
    got = vectors(embed(client, "END", [LONG]))
    np.testing.assert_allclose(got[0], service.embed_texts([LONG]).vectors[0], atol=1e-6)


@pytest.mark.parametrize("value", ["START", "start", "MIDDLE", "", None, 1])
def test_other_values_are_a_400_naming_the_accepted_ones(client: TestClient, value: Any) -> None:
    response = embed(client, value, [SHORT])
    assert response.status_code == 400
    body = response.json()
    assert_openai_error(body)
    error = body["error"]
    assert error["param"] == "truncate" and error["code"] == "invalid_input"
    for accepted in ("true", "false", '"END"', '"NONE"'):
        assert accepted in error["message"]
    assert '"START" is not offered' in error["message"]
    assert not error["message"].startswith("invalid 'truncate': Value error")


def test_a_nim_request_as_nvidias_client_sends_it(client: TestClient) -> None:
    body = {
        "input": [SHORT, LONG],
        "model": client.get("/v1/models").json()["data"][0]["id"],
        "encoding_format": "float",
        "input_type": "query",
        "truncate": "END",
    }
    assert len(vectors(client.post(URL, json=body))) == 2


def test_the_openapi_schema_lists_nims_values(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    request = schema["paths"]["/v1/embeddings"]["post"]["requestBody"]["content"]
    truncate = request["application/json"]["schema"]["properties"]["truncate"]
    assert {"type": "boolean"} in truncate["anyOf"]
    assert {"enum": ["END", "NONE"], "type": "string"} in truncate["anyOf"]


@pytest.mark.slow  # the client's import (LangChain) takes seconds
@pytest.mark.clients
def test_nvidia_embeddings_gets_the_right_vectors(
    live_server: str, service: EmbeddingService
) -> None:
    nvidia = pytest.importorskip(
        "langchain_nvidia_ai_endpoints",
        reason="needs langchain-nvidia-ai-endpoints (pip install langchain-nvidia-ai-endpoints)",
    )
    # GIVEN NVIDIA's client as its docs configure it for a self-hosted endpoint
    embeddings = nvidia.NVIDIAEmbeddings(base_url=f"{live_server}/v1", model=service.model_id)
    # WHEN it embeds a query and documents (sending input_type and "truncate": "NONE")
    query = embeddings.embed_query("a photo of a cat")
    documents = embeddings.embed_documents([SHORT, "a robot arm"])
    # THEN each vector is the one the service computes for the text
    expected = service.embed_texts(["a photo of a cat", SHORT, "a robot arm"]).vectors
    np.testing.assert_allclose([query, *documents], expected, atol=1e-6)
    # AND a long text is refused under its default "NONE", embedded with truncate="END"
    with pytest.raises(Exception, match="context_length_exceeded|over this model's limit"):
        embeddings.embed_query(LONG)
    cut = nvidia.NVIDIAEmbeddings(
        base_url=f"{live_server}/v1", model=service.model_id, truncate="END"
    ).embed_query(LONG)
    np.testing.assert_allclose(cut, service.embed_texts([LONG]).vectors[0], atol=1e-6)
