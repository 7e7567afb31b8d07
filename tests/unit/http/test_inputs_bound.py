"""The most inputs one request may hold (inputs_bound.py), on the demo service: the setting
as it stands, else the smallest of OpenAI's 2048, what fits the response limit and what the
timeout computes at the init's measured pace; and the 413's message that states it."""

from __future__ import annotations

import pytest
from siglip_text.engine.limits import inputs_in_time
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.inputs_bound import (
    BATCH_SIZE_DOCS,
    OPENAI_MAX_INPUTS,
    InputsBound,
    derive_inputs_bound,
)
from siglip_text.http.response_size import inputs_that_fit
from siglip_text.settings import MAX_INPUTS_CEILING, Settings

#: Lambda's synchronous response limit.
LAMBDA_RESPONSE = 6 * 1024 * 1024
#: What tests/functional/http/test_fuzz.py holds every error message to.
MESSAGE_LIMIT = 320


def with_settings(settings: Settings, **changes: object) -> Settings:
    return settings.model_copy(update=changes)


def by_response(service: EmbeddingService, limit: int, encoding: str = "float") -> int:
    return inputs_that_fit(
        limit,
        dimension=service.dimension,
        encoding=encoding,
        model=service.model_id,
        max_tokens=service.max_tokens,
    )


def by_time(service: EmbeddingService, settings: Settings) -> int:
    assert settings.function_timeout_seconds is not None
    assert service.probe_seconds_per_input is not None
    return inputs_in_time(
        timeout_s=settings.function_timeout_seconds,
        reserve_s=settings.time_reserve_ms / 1000.0,
        seconds_per_input=service.probe_seconds_per_input,
    )


def timeout_for(service: EmbeddingService, settings: Settings, inputs: int) -> float:
    """A timeout whose time bound is about ``inputs`` at the demo's measured pace (the pace
    differs by machine: the timeout follows it, so that the time bound is the smallest)."""
    pace = service.probe_seconds_per_input
    assert pace is not None, "the init's probe measured the demo's pace"
    return settings.time_reserve_ms / 1000.0 + inputs * pace * 3 / 2


def test_a_number_in_the_setting_is_the_bound_whatever_the_limits(
    service: EmbeddingService, settings: Settings
) -> None:
    tight = with_settings(
        settings,
        max_inputs_per_request=7,
        function_timeout_seconds=timeout_for(service, settings, 3),
    )
    bound = derive_inputs_bound(service, tight, response_limit=1000)
    assert bound == InputsBound(7, "SIGLIP_MAX_INPUTS_PER_REQUEST=7")
    assert bound.by_response is None and bound.by_time is None


def test_auto_without_limits_is_openais_own_2048(
    service: EmbeddingService, settings: Settings
) -> None:
    auto = with_settings(settings, max_inputs_per_request="auto", function_timeout_seconds=None)
    bound = derive_inputs_bound(service, auto, response_limit=None)
    assert bound == InputsBound(OPENAI_MAX_INPUTS, "OpenAI's own limit per request")
    assert OPENAI_MAX_INPUTS == 2048


def test_a_response_limit_bounds_by_what_fits_as_float_json(
    service: EmbeddingService, settings: Settings
) -> None:
    auto = with_settings(settings, max_inputs_per_request="auto", function_timeout_seconds=None)
    bound = derive_inputs_bound(service, auto, response_limit=100_000)
    expected = by_response(service, 100_000)
    assert 0 < expected < OPENAI_MAX_INPUTS
    assert bound.value == bound.by_response == expected and bound.by_time is None
    assert bound.basis == (
        f"{service.dimension}-d float vectors in the 100,000-byte response limit"
    )
    # float JSON is the larger encoding: the bound holds for base64 answers too
    assert by_response(service, 100_000, "base64") >= expected
    # behind Lambda's 6 MB the demo's small vectors fit more than 2048: OpenAI's bound holds
    lambda_bound = derive_inputs_bound(service, auto, response_limit=LAMBDA_RESPONSE)
    assert lambda_bound.by_response == by_response(service, LAMBDA_RESPONSE) > OPENAI_MAX_INPUTS
    assert lambda_bound.value == OPENAI_MAX_INPUTS


def test_a_timeout_bounds_by_what_the_measured_pace_computes_in_it(
    service: EmbeddingService, settings: Settings
) -> None:
    timed = with_settings(
        settings,
        max_inputs_per_request="auto",
        function_timeout_seconds=timeout_for(service, settings, 200),
    )
    bound = derive_inputs_bound(service, timed, response_limit=None)
    expected = by_time(service, timed)
    assert 0 < expected < OPENAI_MAX_INPUTS
    assert bound.value == bound.by_time == expected and bound.by_response is None
    assert bound.basis.startswith("what 67% of the ")
    assert f"{timed.function_timeout_seconds:g} s timeout" in bound.basis
    pace_ms = f"{service.probe_seconds_per_input * 1000:.2f} ms"  # type: ignore[operator]
    assert bound.basis.endswith(f"at the {pace_ms} per input measured at init")


def test_without_a_measured_pace_a_timeout_sets_no_bound(
    service: EmbeddingService, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    timed = with_settings(settings, max_inputs_per_request="auto", function_timeout_seconds=1.0)
    monkeypatch.setattr(service, "probe_seconds_per_input", None)
    bound = derive_inputs_bound(service, timed, response_limit=None)
    assert bound == InputsBound(OPENAI_MAX_INPUTS, "OpenAI's own limit per request")


@pytest.mark.parametrize(
    ("response_limit", "time_inputs", "wins"),
    [
        (20_000, 1000, "response"),
        (200_000, 40, "time"),
        (LAMBDA_RESPONSE, 10_000, "openai"),
        (None, 100, "time"),
    ],
)
def test_the_smallest_limit_wins_and_the_basis_names_it(
    service: EmbeddingService,
    settings: Settings,
    response_limit: int | None,
    time_inputs: int,
    wins: str,
) -> None:
    timed = with_settings(
        settings,
        max_inputs_per_request="auto",
        function_timeout_seconds=timeout_for(service, settings, time_inputs),
    )
    bound = derive_inputs_bound(service, timed, response_limit=response_limit)
    candidates = {"openai": OPENAI_MAX_INPUTS, "time": by_time(service, timed)}
    if response_limit is not None:
        candidates["response"] = by_response(service, response_limit)
    assert min(candidates, key=candidates.__getitem__) == wins
    assert bound.value == candidates[wins]
    assert bound.by_time == candidates["time"]
    assert bound.by_response == candidates.get("response")
    words = {"openai": "OpenAI's own", "time": "timeout", "response": "response limit"}
    assert words[wins] in bound.basis
    assert all(words[other] not in bound.basis for other in words if other != wins)


def test_a_response_limit_too_small_for_one_answer_still_bounds_at_one(
    service: EmbeddingService, settings: Settings
) -> None:
    auto = with_settings(settings, max_inputs_per_request="auto", function_timeout_seconds=None)
    bound = derive_inputs_bound(service, auto, response_limit=10)
    assert bound.by_response == 0 and bound.value == 1


def test_the_refusal_states_the_bound_its_basis_and_the_batch_size_to_set() -> None:
    bound = InputsBound(96, "OpenAI's own limit per request")
    message = bound.refusal(97)
    assert message.startswith("'input' has 97 items; this endpoint answers at most 96 per ")
    assert "(OpenAI's own limit per request)" in message
    assert "set your client's batch size to 96 or fewer" in message
    assert BATCH_SIZE_DOCS in message and "max_inputs_per_request" in message


def widest_bounds(service: EmbeddingService, settings: Settings) -> list[InputsBound]:
    """A bound of each basis, at the widest numbers each can print."""
    ceiling = with_settings(settings, max_inputs_per_request=MAX_INPUTS_CEILING)
    auto = with_settings(settings, max_inputs_per_request="auto", function_timeout_seconds=None)
    slowest = with_settings(auto, function_timeout_seconds=899.999, time_reserve_ms=0)
    bounds = [
        derive_inputs_bound(service, ceiling, response_limit=None),
        derive_inputs_bound(service, auto, response_limit=None),
        derive_inputs_bound(service, auto, response_limit=1_199_999),
    ]
    with pytest.MonkeyPatch.context() as patch:  # the slowest pace, for this call only
        patch.setattr(service, "probe_seconds_per_input", 99_999.999)
        bounds.append(derive_inputs_bound(service, slowest, response_limit=None))
    return bounds


def test_the_refusal_stays_within_an_error_messages_length_for_every_basis(
    service: EmbeddingService, settings: Settings
) -> None:
    bounds = widest_bounds(service, settings)
    bases = [b.basis for b in bounds]
    assert [("SIGLIP_" in b, "OpenAI" in b, "response" in b, "timeout" in b) for b in bases] == [
        (True, False, False, False),
        (False, True, False, False),
        (False, False, True, False),
        (False, False, False, True),
    ]
    for bound in bounds:
        # the dimension of a real bundle prints wider than the demo's: room is left for it
        widest = InputsBound(MAX_INPUTS_CEILING, bound.basis).refusal(10**12)
        assert len(widest) + len("1152") <= MESSAGE_LIMIT, widest
