"""http/embeddings.py: a ``POST /v1/embeddings`` body read, checked against the served model
and embedded, on the real demo model; each refusal a 4xx that names the field."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from siglip_text.engine.errors import SiglipError
from siglip_text.engine.service import Embeddings, EmbeddingService, TextInputs, TokenIdInputs
from siglip_text.http.embeddings import as_inputs, embed_body, items_limit, parse_request
from siglip_text.http.inputs_bound import OPENAI_MAX_INPUTS, InputsBound
from siglip_text.settings import Settings

#: The bound `serve` derives: nothing in front of it limits a request's inputs.
BOUND = InputsBound(OPENAI_MAX_INPUTS, "OpenAI's own limit per request")


def body(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def embed(
    service: EmbeddingService, settings: Settings, payload: bytes
) -> tuple[bytes, int, Embeddings]:
    """`embed_body` of ``payload`` with no deadline, no limit on the answer and `BOUND`."""
    return embed_body(service, settings, payload, deadline=None, response_limit=None, bound=BOUND)


def refusal(call: object) -> SiglipError:
    with pytest.raises(SiglipError) as raised:
        call()  # type: ignore[operator]
    return raised.value


def test_a_text_is_embedded_as_a_unit_vector_of_the_models_width(
    service: EmbeddingService, settings: Settings
) -> None:
    content, count, _ = embed(service, settings, body(input="a cat", model=service.model_id))
    answer = json.loads(content)
    vector = np.asarray(answer["data"][0]["embedding"])
    assert count == 1 and answer["model"] == service.model_id
    assert vector.shape == (service.dimension,)
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


def test_base64_carries_the_same_float32_vector(
    service: EmbeddingService, settings: Settings
) -> None:
    def vector(encoding: str) -> np.ndarray:
        content, _, _ = embed(service, settings, body(input=["a dog"], encoding_format=encoding))
        value = json.loads(content)["data"][0]["embedding"]
        if encoding == "base64":
            return np.frombuffer(base64.b64decode(value), dtype="<f4")
        return np.asarray(value, dtype=np.float32)

    assert np.array_equal(vector("float"), vector("base64"))


def test_another_model_is_a_404_kind_naming_the_one_served(
    service: EmbeddingService, settings: Settings
) -> None:
    error = refusal(
        lambda: embed(service, settings, body(input="x", model="text-embedding-3-small"))
    )
    assert error.code == "model_not_found" and service.model_id in str(error)


def test_a_shorter_dimension_is_refused_naming_the_native_one(
    service: EmbeddingService, settings: Settings
) -> None:
    error = refusal(lambda: embed(service, settings, body(input="x", dimensions=8)))
    assert getattr(error, "param", None) == "dimensions"
    assert str(service.dimension) in str(error)


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        (b"[1, 2]", "must be a JSON object"),
        (body(model="m"), "'input' is required"),
        (body(input=[]), "must not be an empty array"),
        (body(input={"text": "x"}), "'input'"),
    ],
)
def test_malformed_requests_name_what_to_fix(
    payload: bytes, says: str, service: EmbeddingService, settings: Settings
) -> None:
    error = refusal(lambda: embed(service, settings, payload))
    assert says in str(error)


def test_a_body_with_more_values_than_allowed_is_refused_before_it_is_parsed() -> None:
    many = json.dumps({"input": ["x"] * (items_limit(2) + 1)}).encode()
    assert refusal(lambda: parse_request(many, max_inputs=2)).code == "too_many_inputs"


def test_the_input_forms_are_told_apart_once() -> None:
    assert isinstance(as_inputs("a"), TextInputs) and as_inputs("a").items == ["a"]
    assert isinstance(as_inputs(["a", "b"]), TextInputs)
    assert isinstance(as_inputs([1, 2]), TokenIdInputs) and as_inputs([1, 2]).items == [[1, 2]]
    assert isinstance(as_inputs([[1], [2]]), TokenIdInputs)
    assert as_inputs([]).items == []
