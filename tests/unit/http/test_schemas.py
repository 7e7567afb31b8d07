from __future__ import annotations

import json

import numpy as np
from siglip_text.http.schemas import embeddings_response, encode_base64

from devkit.openai_shapes import assert_openai_response, decode_base64


def test_base64_rows_decode_like_openai_python() -> None:
    vectors = np.random.default_rng(0).standard_normal((3, 7)).astype(np.float32)
    encoded = encode_base64(vectors)
    assert len(encoded) == 3
    for row, text in zip(vectors, encoded, strict=True):
        assert np.array_equal(decode_base64(text), row)


def test_base64_is_little_endian_even_from_big_endian_arrays() -> None:
    vectors = np.array([[1.5, -2.25]], dtype=">f4")
    assert np.array_equal(decode_base64(encode_base64(vectors)[0]), [1.5, -2.25])


def test_response_body_validates_against_openai_schema() -> None:
    vectors = np.eye(2, 4, dtype=np.float32)
    for encoding in ("float", "base64"):
        body = json.loads(
            embeddings_response(vectors, model="m", prompt_tokens=5, encoding_format=encoding)
        )
        assert_openai_response(body)
        assert body["usage"] == {"prompt_tokens": 5, "total_tokens": 5}
        assert [d["index"] for d in body["data"]] == [0, 1]


def test_float_response_round_trips_exactly() -> None:
    vectors = np.random.default_rng(1).standard_normal((2, 16)).astype(np.float32)
    body = json.loads(
        embeddings_response(vectors, model="m", prompt_tokens=1, encoding_format="float")
    )
    got = np.array([d["embedding"] for d in body["data"]], dtype=np.float32)
    assert np.array_equal(got, vectors)
