"""The Lambda handler answers every event a client can shape, and never raises: a header
Mangum cannot parse, a body that is not base64, an event without the fields Mangum reads.
Each case is a function error on a handler that lets Mangum raise (API Gateway and function
URLs turn it into a 502, which OpenAI clients retry twice)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from siglip_text.aws.function import LambdaFunction

from devkit.aws_lambda import (
    LambdaContext,
    built_lambda,
    built_lambda_with_key,
    lambda_answer,
    load_event,
)
from devkit.openai_shapes import assert_openai_error, assert_openai_response

TEMPLATES = ["rest-embeddings-text.json", "http-embeddings-text.json", "url-embeddings-text.json"]
KEY = "sk-never-raises-0123456789"

Shape = Callable[[dict[str, Any]], None]


def header(name: str, value: str) -> Shape:
    """The event with the header ``name`` set to ``value`` (as the gateway passes it on)."""

    def shape(event: dict[str, Any]) -> None:
        event["headers"] = {k: v for k, v in event["headers"].items() if k.lower() != name}
        event["headers"][name] = value
        if "multiValueHeaders" in event:
            multi = event["multiValueHeaders"]
            event["multiValueHeaders"] = {k: v for k, v in multi.items() if k.lower() != name}
            event["multiValueHeaders"][name] = [value]

    return shape


def not_base64(event: dict[str, Any]) -> None:
    event["body"], event["isBase64Encoded"] = "eyJpbnB1dCI6I", True  # padding cut short


def without(*path: str) -> Shape:
    def shape(event: dict[str, Any]) -> None:
        holder = event
        for name in path[:-1]:
            holder = holder[name]
        holder.pop(path[-1], None)

    return shape


def null_identity(event: dict[str, Any]) -> None:
    event["requestContext"]["identity"] = None


#: Headers the app never reads, which Mangum parses for the ASGI scope's ``server``.
SERVED = {
    "x-forwarded-port-list": header("x-forwarded-port", "443,80"),
    "x-forwarded-port-text": header("x-forwarded-port", "abc"),
    "host-ipv6-with-port": header("host", "[::1]:443"),
    "host-empty-port": header("host", "h:"),
}
#: What the handler refuses with a 400, before any work.
REFUSED = {
    "host-port-not-a-number": (header("host", "h:notaport"), "invalid_host"),
    "host-two-colons": (header("host", "a:1:2"), "invalid_host"),
    "body-not-base64": (not_base64, "invalid_input"),
    "no-request-context": (without("requestContext"), "invalid_input"),
}


@pytest.fixture(scope="module")
def function(demo_dir: Path) -> Iterator[LambdaFunction]:
    with built_lambda(demo_dir) as built:
        yield built


@pytest.fixture(scope="module")
def keyed_function(demo_dir: Path) -> Iterator[LambdaFunction]:
    with built_lambda_with_key(demo_dir, KEY) as built:
        yield built


def shaped(template: str, shape: Shape) -> dict[str, Any]:
    event = load_event(template)
    shape(event)
    return event


def answer(function: LambdaFunction, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    status, headers, body = lambda_answer(function.handler(event, LambdaContext()))
    assert headers["content-type"].startswith("application/json")
    return status, json.loads(body)


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("case", sorted(SERVED))
def test_a_header_only_mangum_parses_gets_the_usual_answer(
    function: LambdaFunction, template: str, case: str
) -> None:
    # GIVEN a request whose Host or X-Forwarded-Port Mangum cannot parse into a port
    event = shaped(template, SERVED[case])
    # WHEN the handler serves it; THEN the vectors come back, as without the header
    status, body = answer(function, event)
    assert status == 200, body
    assert_openai_response(body)


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_an_event_mangum_cannot_read_is_a_400_in_openai_shape(
    function: LambdaFunction, template: str, case: str
) -> None:
    shape, code = REFUSED[case]
    status, body = answer(function, shaped(template, shape))
    assert status == 400, body
    assert_openai_error(body)
    assert body["error"]["code"] == code


@pytest.mark.parametrize(
    ("template", "shape"),
    [
        ("http-embeddings-text.json", without("requestContext", "http", "sourceIp")),
        ("url-embeddings-text.json", without("requestContext", "http")),
        ("rest-embeddings-text.json", without("httpMethod")),
        ("rest-embeddings-text.json", null_identity),
    ],
    ids=["http-no-source-ip", "url-no-http", "rest-no-method", "rest-null-identity"],
)
def test_a_missing_request_context_field_is_a_400(
    function: LambdaFunction, template: str, shape: Shape
) -> None:
    status, body = answer(function, shaped(template, shape))
    assert status == 400, body
    assert_openai_error(body)


@pytest.mark.parametrize("template", TEMPLATES)
def test_a_keyless_client_gets_the_refusal_before_any_key_check(
    keyed_function: LambdaFunction, template: str
) -> None:
    # GIVEN the function in api-key mode and requests without a key
    # WHEN one carries a Host the server must refuse, and one an unparsed X-Forwarded-Port
    refused, body = answer(keyed_function, shaped(template, header("host", "h:notaport")))
    keyless, _ = answer(keyed_function, shaped(template, header("x-forwarded-port", "443,80")))
    # THEN the first is refused as a bad request, the second as any keyless request is
    assert (refused, body["error"]["code"], keyless) == (400, "invalid_host", 401)


def test_a_header_value_that_is_no_text_is_a_400_naming_the_headers(
    function: LambdaFunction,
) -> None:
    # GIVEN an event with a header value that is no text (Mangum raised encoding it: a 500)
    event = load_event("http-embeddings-text.json")
    event["headers"]["x-odd"] = 7
    # WHEN the handler serves it
    status, body = answer(function, event)
    # THEN a 400 in OpenAI's shape that names the event's shape and the field
    assert status == 400
    assert_openai_error(body)
    assert "HTTP API v2" in body["error"]["message"] and "headers" in body["error"]["message"]
