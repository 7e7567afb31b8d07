"""The official openai client, unchanged, against a live `siglip-text serve --demo`."""

from __future__ import annotations

import numpy as np
import pytest
from openai import BadRequestError, NotFoundError, OpenAI


@pytest.fixture(scope="module")
def openai_client(live_server: str) -> OpenAI:
    return OpenAI(base_url=f"{live_server}/v1", api_key="not-used", max_retries=0)


def test_default_request_uses_base64_and_decodes_to_our_vectors(
    openai_client: OpenAI, service
) -> None:
    texts = ["a red block", "a robot arm"]
    response = openai_client.embeddings.create(model=service.model_id, input=texts)
    got = np.array([item.embedding for item in response.data], dtype=np.float32)
    np.testing.assert_allclose(got, service.embed_texts(texts).vectors, atol=1e-6)
    assert response.usage.prompt_tokens == sum(service.tokenizer.encode_texts(texts).lengths)


def test_float_encoding_gives_the_same_vectors(openai_client: OpenAI, service) -> None:
    response = openai_client.embeddings.create(
        model=service.model_id, input="a photo of a cat", encoding_format="float"
    )
    np.testing.assert_allclose(
        response.data[0].embedding, service.embed_texts(["a photo of a cat"]).vectors[0], atol=1e-6
    )


def test_token_id_input_through_the_client_is_refused_by_default(
    openai_client: OpenAI, service
) -> None:
    # (embedded under SIGLIP_TOKEN_ID_INPUTS=accept: test_token_ids_refused_by_default.py)
    with pytest.raises(BadRequestError) as caught:
        openai_client.embeddings.create(model=service.model_id, input=[[300, 301, 302]])
    assert caught.value.code == "token_ids_rejected" and caught.value.param == "input"


def test_wrong_model_raises_not_found(openai_client: OpenAI) -> None:
    with pytest.raises(NotFoundError) as caught:
        openai_client.embeddings.create(model="text-embedding-3-small", input="x")
    assert caught.value.code == "model_not_found"


def test_empty_string_is_embedded(openai_client: OpenAI, service) -> None:
    response = openai_client.embeddings.create(model=service.model_id, input=["", "a cat"])
    got = np.array([item.embedding for item in response.data], dtype=np.float32)
    np.testing.assert_allclose(got, service.embed_texts(["", "a cat"]).vectors, atol=1e-6)


def test_empty_token_array_raises_bad_request(openai_client: OpenAI, service) -> None:
    with pytest.raises(BadRequestError) as caught:
        openai_client.embeddings.create(model=service.model_id, input=[[]])
    assert caught.value.param == "input"
