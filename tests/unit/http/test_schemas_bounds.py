"""The request's bounds, before and while it is parsed: `schemas.json_items` (a count of the
values a body holds, from its bytes) and the schema's own bounds (OpenAI's: 8192 token ids
per input, 300,000 per request), as `app.parse_request` and `app.validate_request` apply them.
"""

from __future__ import annotations

import json
import time
import tracemalloc

import pytest
from siglip_text.engine.errors import InvalidInputError, TooManyInputsError
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.embeddings import items_limit, parse_request, validate_request
from siglip_text.http.schemas import (
    MAX_TOKEN_IDS_PER_INPUT,
    MAX_TOKEN_IDS_PER_REQUEST,
    json_items,
    json_items_at_most,
)
from siglip_text.settings import Settings


@pytest.mark.parametrize(
    ("body", "at_least"),
    [
        (b'{"input": "x"}', 1),
        (b'{"input": ["a", "b", "c"]}', 3),
        (b'{"input": [[1, 2], [3]], "model": "m"}', 5),
        (b"[]", 0),
    ],
)
def test_json_items_counts_at_least_the_values_a_body_holds(body: bytes, at_least: int) -> None:
    assert json_items(body) >= at_least
    assert json_items(body) <= at_least + 3  # containers and the outer object, no more


def test_separators_inside_strings_do_not_count() -> None:
    # GIVEN 2 texts full of commas and brackets, one with escaped quotes
    body = json.dumps({"input": ["a, b, [c], {d}" * 1000, 'say \\"x, y\\"' * 100]}).encode()
    # THEN they count as the 2 values they are, though the first count is over the limit
    assert json_items(body) <= 5
    assert json_items_at_most(body, 10)


def test_an_unterminated_string_full_of_escaped_quotes_is_scanned_in_linear_time() -> None:
    # GIVEN 2 MB of escaped quotes after an opening quote that never closes
    body = b'{"input": "' + b'\\"' * 1_000_000
    started = time.monotonic()
    json_items(body)
    # THEN one pass (a scan that restarted at each quote would take hours; generous bound)
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    "body",
    [
        b'{"input":[' + b",".join([b"1"] * 400_000) + b"]}",
        b'{"input":[' + b",".join([b"[1]"] * 400_000) + b"]}",
        b'{"input":"x","extra":[' + b",".join([b"{}"] * 400_000) + b"]}",
    ],
    ids=["token-ids", "one-token-arrays", "objects-elsewhere"],
)
def test_a_body_with_more_values_than_a_request_may_hold_is_refused_before_parsing(
    body: bytes,
) -> None:
    assert json_items(body) > items_limit(2048)
    tracemalloc.start()
    try:
        with pytest.raises(TooManyInputsError) as refused:
            parse_request(body, max_inputs=2048)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # THEN a 413 naming the bounds, having made no object of its values (parsed, each would
    # cost tens of bytes): at most the body again, with its strings emptied, while counting
    assert refused.value.param == "input"
    assert "300,000 token ids" in refused.value.message
    assert peak < 2.5 * len(body), peak / len(body)


def test_one_input_may_hold_8192_token_ids_and_no_more() -> None:
    at_limit = json.dumps({"input": [5] * MAX_TOKEN_IDS_PER_INPUT}).encode()
    assert parse_request(at_limit, max_inputs=2048).input == [5] * MAX_TOKEN_IDS_PER_INPUT
    for value in ([5] * (MAX_TOKEN_IDS_PER_INPUT + 1), [[5], [5] * (MAX_TOKEN_IDS_PER_INPUT + 1)]):
        with pytest.raises(InvalidInputError) as refused:
            parse_request(json.dumps({"input": value}).encode(), max_inputs=2048)
        assert "at most 8192" in refused.value.message


def test_a_request_may_hold_300000_token_ids_and_no_more(
    service: EmbeddingService, settings: Settings
) -> None:
    per_input = 8000
    inputs = MAX_TOKEN_IDS_PER_REQUEST // per_input
    over = [[5] * per_input] * (inputs + 1)
    parsed = parse_request(json.dumps({"input": over}).encode(), max_inputs=2048)
    with pytest.raises(TooManyInputsError) as refused:
        validate_request(parsed, service, settings)
    assert f"holds {per_input * (inputs + 1)} token ids" in refused.value.message
    exactly = [[5] * per_input] * inputs + [[5] * (MAX_TOKEN_IDS_PER_REQUEST % per_input)]
    parsed = parse_request(json.dumps({"input": exactly}).encode(), max_inputs=2048)
    assert len(validate_request(parsed, service, settings).items) == inputs + 1
