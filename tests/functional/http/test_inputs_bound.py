"""The most inputs a request may hold, derived from what the deployment can answer
(http/inputs_bound.py): the response bound from the bundle's dimension against the frontend's
limit, the time bound from the init probe's pace against the function's timeout, OpenAI's
2048 at most; stated by /health and /v1/models, and a 413 past it that states it.

Each expected bound is computed here from the bundle and the pace the service measured, by
the arithmetic docs/api.md states, not by the code under test.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from siglip_text.engine.limits import inputs_in_time
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.http.response_size import LAMBDA_RESPONSE_LIMIT_BYTES, response_bound
from siglip_text.settings import Settings, load_service, load_settings

from devkit.aws_lambda import LambdaContext, built_lambda, lambda_answer, load_event
from devkit.openai_shapes import assert_openai_error

URL = "/v1/embeddings"
RESERVE_S = 0.5  # SIGLIP_TIME_RESERVE_MS's default


def texts(count: int) -> list[str]:
    return [f"a photo of thing number {i}" for i in range(count)]


def float_fit(limit: int, service: EmbeddingService) -> int:
    """The most float vectors whose worst-case answer fits ``limit``, by counting up."""
    count = 0
    while (
        response_bound(
            count + 1,
            dimension=service.dimension,
            encoding="float",
            model=service.model_id,
            max_tokens=service.max_tokens,
        )
        <= limit
    ):
        count += 1
    return count


def time_fit(timeout_s: float, pace: float) -> int:
    """Two thirds of the timeout less the reserve at ``pace``, down to a multiple of 16."""
    fits = math.floor((timeout_s - RESERVE_S) * 2 / 3 / pace)
    return fits - fits % 16 if fits >= 16 else max(fits, 1)


def stated(client: TestClient) -> tuple[int, int]:
    health = client.get("/health").json()["max_inputs_per_request"]
    (model,) = client.get("/v1/models").json()["data"]
    return health, model["max_inputs_per_request"]


@pytest.fixture(scope="module")
def demo_settings(demo_dir: Path) -> Settings:
    return load_settings(model_dir=demo_dir, ort_intra_op_threads=1)


@pytest.fixture(scope="module")
def demo(demo_settings: Settings) -> EmbeddingService:
    return load_service(demo_settings)


@pytest.fixture
def lambda_like(demo: EmbeddingService, demo_settings: Settings) -> Iterator[TestClient]:
    """The demo behind Lambda's response limit and the template's 28 s timeout."""
    settings = demo_settings.model_copy(update={"function_timeout_seconds": 28.0})
    app = create_app(demo, settings, frontend_response_limit=LAMBDA_RESPONSE_LIMIT_BYTES)
    with TestClient(app) as client:
        yield client


def test_the_probe_measured_a_pace(demo: EmbeddingService) -> None:
    pace = demo.probe_seconds_per_input
    assert pace is not None and 0 < pace < 1


def test_with_the_templates_timeout_the_demo_takes_more_than_150(
    lambda_like: TestClient, demo: EmbeddingService
) -> None:
    # GIVEN the demo behind Lambda's 6 MB and a 28 s timeout, its pace measured at init
    assert demo.probe_seconds_per_input is not None
    by_time = time_fit(28.0, demo.probe_seconds_per_input)
    by_response = float_fit(LAMBDA_RESPONSE_LIMIT_BYTES, demo)
    # THEN /health and /v1/models state the smallest of the two and OpenAI's 2048
    expected = min(by_time, by_response, 2048)
    assert stated(lambda_like) == (expected, expected)
    # AND the pace this CPU measured allows more than the 150 texts clients send at once
    assert expected > 150
    response = lambda_like.post(URL, json={"input": texts(150), "encoding_format": "float"})
    assert response.status_code == 200, response.text[:300]
    assert len(response.json()["data"]) == 150


def test_a_small_response_limit_sets_the_bound(
    demo: EmbeddingService, demo_settings: Settings
) -> None:
    # GIVEN a proxy that buffers at most 20,000 bytes (no timeout: `serve`)
    limited = demo_settings.model_copy(update={"max_response_bytes": 20_000})
    with TestClient(create_app(demo, limited)) as client:
        bound = float_fit(20_000, demo)
        # THEN the bound is the most float vectors that fit, whatever the encoding
        assert 1 < bound < 2048 and stated(client) == (bound, bound)
        for encoding in ("float", "base64"):
            at = client.post(URL, json={"input": texts(bound), "encoding_format": encoding})
            assert at.status_code == 200, at.text[:300]
            past = client.post(URL, json={"input": texts(bound + 1), "encoding_format": encoding})
            error = past.json()
            assert past.status_code == 413 and error["error"]["code"] == "too_many_inputs"
            assert f"at most {bound} per request" in error["error"]["message"]
            assert "20,000-byte response limit" in error["error"]["message"]


def test_a_short_timeout_sets_the_bound_from_the_measured_pace(
    demo: EmbeddingService, demo_settings: Settings
) -> None:
    # GIVEN a timeout whose two thirds (less the reserve) hold about 100 inputs at the pace
    pace = demo.probe_seconds_per_input
    assert pace is not None
    timeout_s = RESERVE_S + 100 * pace * 3 / 2
    short = demo_settings.model_copy(update={"function_timeout_seconds": timeout_s})
    with TestClient(create_app(demo, short)) as client:
        # THEN the bound is the time's, a multiple of 16, stated by both routes
        bound = time_fit(timeout_s, pace)
        assert bound % 16 == 0 and 64 <= bound <= 100
        assert stated(client) == (bound, bound)
        past = client.post(URL, json={"input": texts(bound + 1)})
    error = past.json()["error"]
    assert past.status_code == 413 and error["code"] == "too_many_inputs"
    assert f"{timeout_s:g} s timeout" in error["message"]


def test_past_the_bound_a_413_states_it_and_how_to_set_a_batch_size(
    lambda_like: TestClient,
) -> None:
    # GIVEN the bound a Lambda deployment of the demo states
    bound, _ = stated(lambda_like)
    # WHEN one more input is sent
    response = lambda_like.post(URL, json={"input": texts(bound + 1)})
    # THEN a 413 in OpenAI's shape names the count, the bound and where batch sizes are set
    assert response.status_code == 413
    body = response.json()
    assert_openai_error(body)
    error = body["error"]
    assert error["code"] == "too_many_inputs" and error["param"] == "input"
    assert f"'input' has {bound + 1} items" in error["message"]
    assert f"at most {bound} per request" in error["message"]
    assert f"set your client's batch size to {bound} or fewer" in error["message"]
    assert "docs/clients.md#batch-size" in error["message"]


def test_a_number_in_the_setting_overrides_the_derivation(
    demo: EmbeddingService, demo_settings: Settings
) -> None:
    fixed = demo_settings.model_copy(
        update={"max_inputs_per_request": 10, "function_timeout_seconds": 28.0}
    )
    app = create_app(demo, fixed, frontend_response_limit=LAMBDA_RESPONSE_LIMIT_BYTES)
    with TestClient(app) as client:
        assert stated(client) == (10, 10)
        assert client.post(URL, json={"input": texts(10)}).status_code == 200
        error = client.post(URL, json={"input": texts(11)}).json()["error"]
    assert error["code"] == "too_many_inputs"
    assert "SIGLIP_MAX_INPUTS_PER_REQUEST=10" in error["message"]


def test_serve_states_openais_2048(live_server: str) -> None:
    import httpx

    # GIVEN `serve --demo`: no response limit, no invocation timeout
    health = httpx.get(f"{live_server}/health").json()
    # THEN the bound is OpenAI's own
    assert health["max_inputs_per_request"] == 2048


def test_the_lambda_function_derives_it_from_its_timeout(
    demo_dir: Path, demo: EmbeddingService
) -> None:
    # GIVEN the function as the template configures it (auto, its Timeout passed in)
    with built_lambda(demo_dir, SIGLIP_FUNCTION_TIMEOUT_SECONDS="28") as function:
        service = function.parts.service
        pace = service.probe_seconds_per_input
        health = load_event("rest-health.json")
        _, _, body = lambda_answer(function.handler(health, LambdaContext()))
        event = load_event("rest-embeddings-text.json")
        event["body"], event["isBase64Encoded"] = json.dumps({"input": texts(150)}), False
        status, _, answer = lambda_answer(function.handler(event, LambdaContext()))
    # THEN /health states the smaller of its response and time bounds, and 2048
    expected = min(float_fit(LAMBDA_RESPONSE_LIMIT_BYTES, service), time_fit(28.0, pace), 2048)
    assert json.loads(body)["max_inputs_per_request"] == expected
    # AND 150 texts get 150 vectors
    assert status == 200, answer[:300]
    assert len(json.loads(answer)["data"]) == 150


@pytest.mark.parametrize(
    ("timeout_s", "pace", "expected"),
    [
        (28.0, 0.016, 1136),  # base int8 at 1,769 MB (docs/sizes.md)
        (28.0, 0.083, 208),  # base fp32 at 1,769 MB
        (28.0, 0.226, 80),  # giant-opt fp32 at 3,538 MB
        (28.0, 2.0, 9),  # fewer than 16: not rounded
        (0.4, 0.01, 1),  # no time left after the reserve: one input is still tried
        (28.0, 0.0, 18_333_328),  # a pace below the clock's tick (1 us) counts as the tick
    ],
)
def test_inputs_in_time(timeout_s: float, pace: float, expected: int) -> None:
    got = inputs_in_time(timeout_s=timeout_s, reserve_s=RESERVE_S, seconds_per_input=pace)
    assert got == expected == time_fit(timeout_s, max(pace, 1e-6))
