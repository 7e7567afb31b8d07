"""OpenAI's rule for a request body's fields (fields.py): a field the endpoint does not define
is a 400 that names it, from the body's keys alone, for the embeddings and tokenize endpoints
alike; what to do instead where the field is another server's."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from siglip_text.http.embeddings import FIELD_ADVICE as EMBEDDINGS_ADVICE
from siglip_text.http.errors import UnknownFieldError, error_answer
from siglip_text.http.fields import refuse_unknown_fields
from siglip_text.http.schemas import OpenAICompatEmbeddingRequest, TokenizeRequest
from siglip_text.http.tokenize import FIELD_ADVICE as TOKENIZE_ADVICE

from devkit.openai_shapes import assert_openai_error


def refusal(
    data: Any, model: Any = OpenAICompatEmbeddingRequest, advice: Mapping[str, str] | None = None
) -> UnknownFieldError:
    with pytest.raises(UnknownFieldError) as refused:
        refuse_unknown_fields(data, model.model_fields, advice or {})
    return refused.value


def test_an_unknown_field_is_named_and_the_known_ones_listed() -> None:
    known = OpenAICompatEmbeddingRequest.model_fields
    refuse_unknown_fields({"input": "x", "user": "u", "input_type": "query"}, known, {})
    refuse_unknown_fields(["not", "an", "object"], known, {})  # the schema refuses it
    refuse_unknown_fields("a string", known, {})
    error = refusal({"input": "x", "colour": 1})
    assert error.param == "colour"
    assert error.message.startswith("Unrecognized request argument supplied: colour. ")
    assert "'truncate'" in error.message and "'input_type'" in error.message


def test_an_unknown_name_is_escaped_and_shortened_in_the_answer() -> None:
    error = refusal({"inputs": "x", "\n" * 500: 1}, TokenizeRequest)
    assert error.param is not None
    assert "\n" not in error.message and len(error.param) <= 40


def test_several_unknown_fields_are_named_five_at_most_then_counted() -> None:
    data = {"input": "x", **{f"f{i}": i for i in range(8)}}
    error = refusal(data)
    assert error.message.startswith(
        "Unrecognized request arguments supplied: f0, f1, f2, f3, f4 (and 3 more). "
    )
    assert "f5" not in error.message and error.param == "f0"


@pytest.mark.parametrize(
    ("model", "advice"),
    [(OpenAICompatEmbeddingRequest, EMBEDDINGS_ADVICE), (TokenizeRequest, TOKENIZE_ADVICE)],
)
def test_another_servers_field_gets_what_to_do_instead(
    model: Any, advice: Mapping[str, str]
) -> None:
    for field, hint in advice.items():
        assert field not in model.model_fields  # advice only for fields not defined here
        error = refusal({field: True}, model, advice)
        assert error.param == field
        # the advice, its first letter capitalized, in place of the list of known fields
        assert error.message.endswith(hint[0].upper() + hint[1:])


def test_the_advice_for_the_first_unknown_field_is_given() -> None:
    error = refusal({"colour": 1, "normalize": True}, advice=EMBEDDINGS_ADVICE)
    assert error.param == "colour" and "L2-normalized" not in error.message
    error = refusal({"normalize": True, "colour": 1}, advice=EMBEDDINGS_ADVICE)
    assert error.param == "normalize" and "L2-normalized" in error.message


def test_the_refusal_is_an_openai_400_with_the_code_and_param() -> None:
    answer = error_answer(refusal({"input": "x", "dimension": 3}))
    assert answer.status == 400
    body = json.loads(answer.body)
    assert_openai_error(body)
    assert body["error"]["code"] == "unknown_parameter"
    assert body["error"]["param"] == "dimension"
