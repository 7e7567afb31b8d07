"""http/tokenize.py: a ``POST /tokenize`` body (text-embeddings-inference's shapes) read and
answered on the real demo tokenizer; refusals in the field's name; the response's bound."""

from __future__ import annotations

import json

import pytest
from siglip_text.engine.errors import SiglipError
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.tokenize import parse_tokenize_request, tokenize_body


def test_a_text_gives_its_tokens_with_the_sticky_eos_last(service: EmbeddingService) -> None:
    answer = json.loads(
        tokenize_body(service, b'{"inputs": "A Cat"}', max_inputs=8, response_limit=None)
    )
    (tokens,) = answer
    assert tokens[-1]["special"] is True
    assert all(set(t) == {"id", "text", "special", "start", "stop"} for t in tokens)


def test_without_special_tokens_the_eos_is_left_out(service: EmbeddingService) -> None:
    with_eos = json.loads(
        tokenize_body(service, b'{"inputs": ["a cat"]}', max_inputs=8, response_limit=None)
    )[0]
    without = json.loads(
        tokenize_body(
            service,
            b'{"inputs": ["a cat"], "add_special_tokens": false}',
            max_inputs=8,
            response_limit=None,
        )
    )[0]
    assert without == [t for t in with_eos if not t["special"]]


@pytest.mark.parametrize(
    ("payload", "says", "code"),
    [
        (b'"x"', "must be a JSON object", "invalid_input"),
        (b"{}", "'inputs' is required", "invalid_input"),
        (b'{"inputs": []}', "must not be an empty array", "invalid_input"),
        (b'{"inputs": [1]}', "a string or an array of strings", "invalid_input"),
        (b'{"inputs": "x", "add_special_tokens": "no"}', "must be a boolean", "invalid_input"),
        (b'{"inputs": ["a", "b", "c"]}', "at most 2 are accepted", "too_many_inputs"),
    ],
)
def test_malformed_requests_are_refused_naming_the_field(
    payload: bytes, says: str, code: str
) -> None:
    with pytest.raises(SiglipError) as raised:
        parse_tokenize_request(payload, max_inputs=2)
    assert says in str(raised.value) and raised.value.code == code


def test_an_answer_over_the_response_limit_is_refused(service: EmbeddingService) -> None:
    with pytest.raises(SiglipError) as raised:
        tokenize_body(service, b'{"inputs": "a cat"}', max_inputs=8, response_limit=100)
    assert "response limit of 100" in str(raised.value)
