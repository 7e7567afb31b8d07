"""The vector cache is bounded in bytes and keyed by a digest of the text, not the text."""

from __future__ import annotations

import numpy as np
from siglip_text.engine.service import ENTRY_OVERHEAD_BYTES, _VectorCache, text_key


def vector(dimension: int = 768) -> np.ndarray:
    return np.ones(dimension, dtype=np.float32)


def test_the_cache_never_holds_more_bytes_than_its_bound() -> None:
    one = 32 + 33 + 112 + 768 * 4 + ENTRY_OVERHEAD_BYTES  # about one entry
    cache = _VectorCache(size=1_000_000, max_bytes=10 * one)
    for i in range(100):
        cache.put(f"text {i}", vector(), 3)
        assert cache.bytes <= cache.max_bytes
    assert 5 <= len(cache._items) <= 10
    assert cache.get("text 99") is not None and cache.get("text 0") is None


def test_the_cache_holds_digests_not_texts() -> None:
    cache = _VectorCache(size=10, max_bytes=1 << 20)
    long_text = "a private query " * 10_000
    cache.put(long_text, vector(), 64)
    cache.put("\ud800 lone surrogate", vector(), 3)  # JSON allows them; utf-8 alone would fail
    assert set(cache._items) == {text_key(long_text), text_key("\ud800 lone surrogate")}
    assert all(isinstance(key, bytes) and len(key) == 32 for key in cache._items)
    # and an entry's cost does not grow with its text
    short = _VectorCache(size=10, max_bytes=1 << 20)
    short.put("a", vector(), 1)
    short.put("b", vector(), 1)
    assert cache.bytes == short.bytes


def test_replacing_an_entry_does_not_count_it_twice() -> None:
    cache = _VectorCache(size=10, max_bytes=1 << 20)
    cache.put("a", vector(), 1)
    once = cache.bytes
    cache.put("a", vector(), 1)
    assert cache.bytes == once
