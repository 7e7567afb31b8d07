"""The optional LRU of text -> vector (SIGLIP_CACHE_SIZE): same answers, bounded size."""

from __future__ import annotations

import numpy as np
import pytest
from siglip_text.engine.service import EmbeddingService
from siglip_text.settings import load_service, load_settings


@pytest.fixture(scope="module")
def cached(demo_dir) -> EmbeddingService:
    return load_service(load_settings(model_dir=demo_dir, ort_intra_op_threads=1, cache_size=3))


def test_cached_answers_equal_uncached_answers(cached: EmbeddingService, service) -> None:
    texts = ["a cat", "a dog", "a cat", "a bird"]
    first = cached.embed_texts(texts)
    again = cached.embed_texts(texts)
    plain = service.embed_texts(texts)
    np.testing.assert_array_equal(first.vectors, plain.vectors)
    np.testing.assert_array_equal(again.vectors, plain.vectors)
    assert again.token_counts == plain.token_counts
    assert again.cache_hits == 4


def test_cache_never_holds_more_than_its_size(cached: EmbeddingService) -> None:
    cached.embed_texts([f"text number {i}" for i in range(10)])
    assert len(cached._cache._items) == 3  # type: ignore[union-attr]


def test_least_recently_used_entry_is_evicted_first(demo_dir) -> None:
    service = load_service(load_settings(model_dir=demo_dir, ort_intra_op_threads=1, cache_size=2))
    base = service.cache_stats()
    assert base is not None and base["hits"] == 0  # the init probe only missed
    service.embed_texts(["a"])
    service.embed_texts(["b"])
    service.embed_texts(["a"])  # a is now the most recent
    service.embed_texts(["c"])  # evicts b
    stats = service.cache_stats()
    assert stats == {"size": 2, "hits": 1, "misses": base["misses"] + 3}
    assert service.embed_texts(["a"]).cache_hits == 1
    assert service.embed_texts(["b"]).cache_hits == 0


def test_cached_vectors_cannot_be_changed_by_a_caller(cached: EmbeddingService) -> None:
    result = cached.embed_texts(["immutable"])
    result.vectors[0, 0] = 123.0  # the caller's copy
    assert cached.embed_texts(["immutable"]).vectors[0, 0] != 123.0


def test_cache_is_off_by_default(service: EmbeddingService) -> None:
    assert service.cache_stats() is None
    assert service.embed_texts(["x", "x"]).cache_hits == 0
