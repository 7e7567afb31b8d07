"""POST /v1/embeddings and GET /health through the real app and the real ORT session."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from siglip_text.http.app import create_app
from siglip_text.settings import load_settings

from devkit.graphs import broken_service
from devkit.openai_shapes import assert_openai_error, assert_openai_response, decode_base64

URL = "/v1/embeddings"


def post(client: TestClient, body: Any, **kwargs: Any) -> httpx.Response:
    return client.post(URL, json=body, **kwargs)


def expect_error(response: httpx.Response, status: int, *, param: str | None = None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert_openai_error(body)
    if param is not None:
        assert body["error"]["param"] == param
    return body["error"]


def vectors_of(body: dict[str, Any]) -> np.ndarray:
    rows = []
    for item in body["data"]:
        emb = item["embedding"]
        rows.append(decode_base64(emb) if isinstance(emb, str) else np.array(emb, dtype=np.float32))
    return np.stack(rows)


def test_models_lists_the_served_model(client: TestClient, service) -> None:
    body = client.get("/v1/models").json()
    assert [m["id"] for m in body["data"]] == [service.model_id]


def test_single_string_returns_one_unit_vector(client: TestClient, service) -> None:
    response = post(client, {"model": service.model_id, "input": "a photo of a cat"})
    assert response.status_code == 200
    body = response.json()
    assert_openai_response(body)
    assert body["object"] == "list" and body["model"] == service.model_id
    assert [d["index"] for d in body["data"]] == [0]
    vector = vectors_of(body)[0]
    np.testing.assert_allclose(
        vector, service.embed_texts(["a photo of a cat"]).vectors[0], atol=1e-7
    )


def test_batch_keeps_input_order(client: TestClient, service) -> None:
    texts = [f"photo {i} of {'a cat' if i % 2 else 'a dog'}" for i in range(9)]
    body = post(client, {"input": texts}).json()
    assert [d["index"] for d in body["data"]] == list(range(9))
    np.testing.assert_allclose(vectors_of(body), service.embed_texts(texts).vectors, atol=1e-7)
    reversed_body = post(client, {"input": texts[::-1]}).json()
    np.testing.assert_allclose(vectors_of(reversed_body), vectors_of(body)[::-1], atol=1e-7)


def test_base64_is_little_endian_float32_equal_to_float(client: TestClient) -> None:
    texts = ["a red block", "a robot arm"]
    as_float = post(client, {"input": texts, "encoding_format": "float"}).json()
    as_b64 = post(client, {"input": texts, "encoding_format": "base64"}).json()
    assert all(isinstance(d["embedding"], str) for d in as_b64["data"])
    assert_openai_response(as_b64)
    np.testing.assert_array_equal(vectors_of(as_b64), vectors_of(as_float).astype(np.float32))


def test_float_json_round_trips_exactly_to_float32(client: TestClient, service) -> None:
    body = post(client, {"input": ["exactness"]}).json()
    exact = service.embed_texts(["exactness"]).vectors[0]
    assert np.array_equal(np.array(body["data"][0]["embedding"], dtype=np.float32), exact)


def test_token_id_list_is_one_input_without_eos_added(client: TestClient, service) -> None:
    ids = service.tokenizer.encode_texts(["a photo of a cat"]).ids[0]
    content = [int(i) for i in ids if i != service.tokenizer.pad_id]
    body = post(client, {"input": content}).json()
    assert len(body["data"]) == 1
    assert body["usage"]["prompt_tokens"] == len(content)
    np.testing.assert_allclose(
        vectors_of(body)[0], service.embed_texts(["a photo of a cat"]).vectors[0], atol=1e-6
    )


def test_batch_of_token_id_lists(client: TestClient) -> None:
    body = post(client, {"input": [[300, 301], [302], [303, 304, 305]]}).json()
    assert [d["index"] for d in body["data"]] == [0, 1, 2]
    assert body["usage"] == {"prompt_tokens": 6, "total_tokens": 6}


def test_usage_counts_tokens_fed_including_eos_excluding_pads(client: TestClient, service) -> None:
    texts = ["a cat", "a red block and a robot arm " * 30]
    body = post(client, {"input": texts}).json()
    expected = sum(service.tokenizer.encode_texts(texts).lengths)
    assert body["usage"] == {"prompt_tokens": expected, "total_tokens": expected}
    assert 64 + 2 <= expected <= 64 + 10


def test_user_and_input_type_are_accepted_and_an_unknown_field_is_a_400(
    client: TestClient,
) -> None:
    accepted = post(client, {"input": "x", "user": "user-1234", "input_type": "query"})
    assert accepted.status_code == 200
    error = expect_error(post(client, {"input": "x", "extra_thing": {"a": 1}}), 400)
    assert error["param"] == "extra_thing"
    assert error["message"].startswith("Unrecognized request argument supplied: extra_thing")


def test_dimensions_equal_to_native_is_accepted(client: TestClient) -> None:
    assert post(client, {"input": "x", "dimensions": 32}).status_code == 200


def test_dimensions_other_than_native_is_400(client: TestClient) -> None:
    error = expect_error(post(client, {"input": "x", "dimensions": 16}), 400, param="dimensions")
    assert "32" in error["message"]


def test_other_model_is_404_model_not_found(client: TestClient) -> None:
    error = expect_error(
        post(client, {"input": "x", "model": "text-embedding-3-small"}), 404, param="model"
    )
    assert error["code"] == "model_not_found"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"input": None},
        {"input": 42},
        {"input": 1.5},
        {"input": [1.5]},
        {"input": ["a", 1]},
        {"input": [[1, "a"]]},
        {"input": [[[1]]]},
        {"input": [True]},
        {"input": {"text": "a"}},
        {"input": "x", "encoding_format": "binary"},
        {"input": "x", "dimensions": "32"},
        {"input": "x", "model": 5},
    ],
    ids=str,
)
def test_invalid_request_shapes_are_400(client: TestClient, body: Any) -> None:
    error = expect_error(post(client, body), 400)
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize("body", [{"input": []}, {"input": [[]]}, {"input": [[1], []]}])
def test_empty_arrays_are_400(client: TestClient, body: Any) -> None:
    expect_error(post(client, body), 400, param="input")


@pytest.mark.parametrize("body", [{"input": ""}, {"input": ["ok", ""]}, {"input": ["", ""]}])
def test_empty_strings_are_embedded_as_eos_then_pads(
    client: TestClient, service, body: Any
) -> None:
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    response = post(client, body)
    assert response.status_code == 200, response.text
    got = np.array([item["embedding"] for item in response.json()["data"]], dtype=np.float32)
    np.testing.assert_allclose(got, service.embed_texts(texts).vectors, atol=1e-6)
    empty = service.tokenizer.encode_texts([""])
    assert empty.ids[0].tolist() == [service.tokenizer.eos_id] + [service.tokenizer.pad_id] * 63
    # the empty string's vector is the one of the ids <eos> + pads, sent as token ids
    by_ids = post(client, {"input": [[service.tokenizer.eos_id]]}).json()["data"][0]["embedding"]
    np.testing.assert_allclose(got[texts.index("")], by_ids, atol=1e-6)
    tokens = sum(service.tokenizer.encode_texts(texts).lengths)
    assert response.json()["usage"]["prompt_tokens"] == tokens


def test_special_token_strings_are_embedded_as_text(client: TestClient, service) -> None:
    eos = service.tokenizer.eos_id
    literal = post(client, {"input": "<eos>"}).json()["data"][0]["embedding"]
    control = post(client, {"input": [[eos, eos]]}).json()["data"][0]["embedding"]
    empty = post(client, {"input": ""}).json()["data"][0]["embedding"]
    assert float(np.dot(literal, control)) < 0.9999 and float(np.dot(literal, empty)) < 0.9999
    np.testing.assert_allclose(literal, service.embed_texts(["<eos>"]).vectors[0], atol=1e-6)


def test_token_id_outside_vocabulary_is_400(client: TestClient, service) -> None:
    error = expect_error(
        post(client, {"input": [[1, service.tokenizer.vocab_size]]}), 400, param="input"
    )
    assert "outside the vocabulary" in error["message"]


@pytest.mark.parametrize(
    "raw", [b"{", b"not json", b"[1, 2]", b'"a string"', b"", b"\xff\xfe{}", b"[" * 100_000]
)
def test_malformed_body_is_400(client: TestClient, raw: bytes) -> None:
    response = client.post(URL, content=raw, headers={"content-type": "application/json"})
    expect_error(response, 400)


def test_error_messages_do_not_echo_the_input(client: TestClient) -> None:
    secret = "my-private-query-" * 20
    error = expect_error(post(client, {"input": [secret, 3]}), 400)
    assert "my-private-query" not in json.dumps(error)


def test_too_many_inputs_is_413(service) -> None:
    settings = load_settings(model_dir=None, max_inputs_per_request=4)
    with TestClient(create_app(service, settings)) as small:
        assert post(small, {"input": ["a"] * 4}).status_code == 200
        error = expect_error(post(small, {"input": ["a"] * 5}), 413, param="input")
        assert "at most 4" in error["message"]


def test_oversized_body_is_413(service) -> None:
    settings = load_settings(max_request_bytes=2048)
    with TestClient(create_app(service, settings)) as small:
        expect_error(post(small, {"input": "a" * 4000}), 413)


def test_unknown_route_is_404_in_openai_shape(client: TestClient) -> None:
    assert expect_error(client.get("/v1/nothing"), 404)["code"] == "not_found"


def test_wrong_method_is_405_in_openai_shape(client: TestClient) -> None:
    response = client.get(URL)
    expect_error(response, 405)
    assert "POST" in response.headers["allow"]


def test_inference_failure_is_500_without_internals(service, demo_dir, tmp_path) -> None:
    # sqrt(id - 5) of the first 32 ids: NaN when an id is below 5, finite otherwise.
    broken = broken_service(service, tmp_path)
    with TestClient(create_app(broken, load_settings(token_id_inputs="accept"))) as test_client:
        assert post(test_client, {"input": [[9] * 40]}).status_code == 200
        response = post(test_client, {"input": [[9, 9, 1]]})
    error = expect_error(response, 500)
    assert error["message"] == "The server had an error while processing your request."
    assert "nan" not in response.text.lower() and "onnx" not in response.text.lower()


def test_saturated_server_answers_429_with_retry_after(service) -> None:
    settings = load_settings(max_concurrent_requests=1, max_pending_requests=0)
    app = create_app(service, settings)
    texts = [f"query {i} " * 20 for i in range(256)]

    async def burst() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as ac:
            return await asyncio.gather(*(ac.post(URL, json={"input": texts}) for _ in range(6)))

    responses = asyncio.run(burst())
    statuses = sorted(r.status_code for r in responses)
    assert 200 in statuses and 429 in statuses, statuses
    for response in responses:
        if response.status_code == 429:
            assert response.headers["retry-after"] == "1"
            assert expect_error(response, 429)["code"] == "rate_limit_exceeded"
        else:
            assert len(response.json()["data"]) == 256
