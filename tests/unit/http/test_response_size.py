"""response_size.py: the largest answer a request can produce, as Lambda's proxy response
carries it."""

from __future__ import annotations

import base64
import json

import numpy as np
import orjson
import pytest
from siglip_text.http.errors import ResponseTooLargeError
from siglip_text.http.response_size import (
    FLOAT_JSON_MAX_BYTES,
    LAMBDA_RESPONSE_LIMIT_BYTES,
    check_response_fits,
    inputs_that_fit,
    response_bound,
)

BASE = {"dimension": 768, "model": "google/siglip2-base-patch16-224", "max_tokens": 64}


def proxy_response(body: bytes) -> int:
    """The size of the Lambda proxy response that carries ``body`` (as Mangum shapes it)."""
    response = {
        "statusCode": 200,
        "headers": {"content-length": str(len(body)), "content-type": "application/json"},
        "multiValueHeaders": {},
        "body": body.decode(),
        "isBase64Encoded": False,
    }
    return len(json.dumps(response).encode())


def answer(vectors: np.ndarray, encoding: str, tokens: int) -> bytes:
    """The body the service writes (schemas.embeddings_response's shape), item by item."""
    payloads = (
        [base64.b64encode(row.astype("<f4").tobytes()).decode() for row in vectors]
        if encoding == "base64"
        else list(vectors)
    )
    return orjson.dumps(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": p} for i, p in enumerate(payloads)
            ],
            "model": BASE["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        },
        option=orjson.OPT_SERIALIZE_NUMPY,
    )


def test_1000_float_vectors_of_768_d_exceed_6_mb_and_as_base64_fit() -> None:
    assert response_bound(1000, encoding="float", **BASE) > LAMBDA_RESPONSE_LIMIT_BYTES
    assert response_bound(1000, encoding="base64", **BASE) <= LAMBDA_RESPONSE_LIMIT_BYTES
    with pytest.raises(ResponseTooLargeError) as refused:
        check_response_fits(1000, limit=LAMBDA_RESPONSE_LIMIT_BYTES, encoding="float", **BASE)
    assert refused.value.code == "response_too_large" and refused.value.param == "input"
    check_response_fits(1000, limit=LAMBDA_RESPONSE_LIMIT_BYTES, encoding="base64", **BASE)


def test_no_limit_refuses_nothing() -> None:
    check_response_fits(100_000, limit=None, encoding="float", **BASE)


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_the_most_that_fit_fit_and_one_more_does_not(encoding: str) -> None:
    fit = inputs_that_fit(LAMBDA_RESPONSE_LIMIT_BYTES, encoding=encoding, **BASE)
    assert response_bound(fit, encoding=encoding, **BASE) <= LAMBDA_RESPONSE_LIMIT_BYTES
    assert response_bound(fit + 1, encoding=encoding, **BASE) > LAMBDA_RESPONSE_LIMIT_BYTES


def test_float_values_of_a_unit_vector_never_take_more_than_the_bound() -> None:
    # every float32 in [-1, 1] that orjson writes longest has a small magnitude (leading
    # zeros then 9 digits): sample the bit patterns of that whole range
    bits = np.random.default_rng(0).integers(0, 0x3F800001, 2_000_000, dtype=np.uint32)
    values = np.concatenate([bits.view(np.float32), -bits.view(np.float32)])
    longest = max(
        len(text)
        for text in orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].split(b",")
    )
    assert longest + 1 == FLOAT_JSON_MAX_BYTES


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_the_bound_holds_for_the_longest_answer_and_is_tight(encoding: str) -> None:
    count = 300
    # the longest values orjson writes, in every component
    vectors = np.full((count, BASE["dimension"]), -0.0000133981575, dtype=np.float32)
    size = proxy_response(answer(vectors, encoding, tokens=count * 64))
    bound = response_bound(count, encoding=encoding, **BASE)
    assert size <= bound
    assert bound - size < 1024 + 8 * count  # the proxy envelope's allowance, a few per item
