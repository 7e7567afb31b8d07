"""aws/function.py: the Lambda function around the app: tracing only when enabled, and a
handler that answers every event in OpenAI's shape and never raises."""

from __future__ import annotations

import json
from pathlib import Path

from siglip_text.aws.function import LambdaFunction, tracing_enabled

from devkit.aws_lambda import (
    LambdaContext,
    built_lambda,
    lambda_answer,
    load_event,
    plain_package_loggers,
)


def test_tracing_is_on_unless_powertools_disables_it() -> None:
    assert tracing_enabled({}) is True
    assert tracing_enabled({"POWERTOOLS_TRACE_DISABLED": "false"}) is True
    for disabled in ("true", "TRUE", " 1 "):
        assert tracing_enabled({"POWERTOOLS_TRACE_DISABLED": disabled}) is False


def test_a_function_not_yet_given_its_app_answers_a_500_and_does_not_raise() -> None:
    with plain_package_loggers():
        function = LambdaFunction({"POWERTOOLS_TRACE_DISABLED": "true"})
        result = function.handler(load_event("rest-embeddings-text.json"), LambdaContext())
    status, _, body = lambda_answer(result)
    assert status == 500
    assert set(json.loads(body)["error"]) == {"message", "type", "param", "code"}


def test_the_built_function_serves_an_event_and_refuses_one_mangum_cannot_read(
    demo_dir: Path,
) -> None:
    with built_lambda(demo_dir) as function:
        served = function.handler(load_event("rest-embeddings-text.json"), LambdaContext())
        unreadable = function.handler({"neither": "rest nor http api"}, LambdaContext())
    assert lambda_answer(served)[0] == 200
    status, _, body = lambda_answer(unreadable)
    assert status == 400 and "error" in json.loads(body)
    assert function.tracer is None  # the tests' environment disables tracing
