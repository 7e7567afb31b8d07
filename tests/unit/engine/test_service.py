"""The service (engine/service.py) on the real demo bundle: inputs in, unit vectors and token
counts out, texts and token ids alike; the probe init runs. Its vector cache has files of its
own (test_service_cache.py, test_service_cache_bytes.py)."""

from __future__ import annotations

import numpy as np
from siglip_text.engine.service import (
    PROBE_TEXT,
    EmbeddingService,
    TextInputs,
    TokenIdInputs,
)


def test_texts_become_unit_vectors_in_input_order_with_the_tokens_fed(
    service: EmbeddingService,
) -> None:
    # GIVEN two texts of different lengths
    texts = ["a red block", "a small blue ball next to a large green cube"]

    # WHEN embedded
    result = service.embed(TextInputs(texts))

    # THEN one unit vector of the bundle's dimension per text, in order, and the tokens each
    # fed (content and EOS, not the padding) add up to the usage
    assert result.vectors.shape == (2, service.dimension)
    assert result.vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(result.vectors, axis=1), 1.0, atol=1e-5)
    assert result.token_counts == list(service.tokenizer.encode_texts(texts).lengths)
    assert result.token_counts[0] < result.token_counts[1]
    assert result.prompt_tokens == sum(result.token_counts)
    np.testing.assert_array_equal(result.vectors[1], service.embed_texts([texts[1]]).vectors[0])


def test_a_texts_contract_ids_as_token_id_inputs_give_its_vector(
    service: EmbeddingService,
) -> None:
    # GIVEN a text and its ids under the contract (content and EOS, padding dropped)
    text = "a photo of a dog"
    batch = service.tokenizer.encode_texts([text])
    ids = batch.ids[0][: batch.lengths[0]].tolist()

    # WHEN each is embedded through the tagged inputs
    by_text = service.embed(TextInputs([text]))
    by_ids = service.embed(TokenIdInputs([ids]))

    # THEN the same vector and the same token count
    np.testing.assert_allclose(by_ids.vectors[0], by_text.vectors[0], atol=1e-6)
    assert by_ids.token_counts == by_text.token_counts


def test_the_probe_returns_the_probe_texts_vector(service: EmbeddingService) -> None:
    vector = service.probe()

    np.testing.assert_allclose(vector, service.embed_texts([PROBE_TEXT]).vectors[0], atol=1e-6)


def test_describe_names_the_model_and_the_runtime(service: EmbeddingService) -> None:
    described = service.describe()

    assert described["model"] == service.model_id == service.manifest.repository
    assert described["embedding_dimension"] == service.dimension
    assert {"siglip_text", "onnxruntime", "tokenizers"} <= set(described["runtime"])
