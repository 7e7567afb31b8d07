"""The shapes Lambda hands the function and takes back (aws/types.py), held to what really
arrives and leaves: every file in events/, the event the function sends itself, the proxy
response the real handler returns, and the context object the tests hand it.

The payload types are ``total=False`` (no key is required: AWS's payloads vary by
integration), so what is checked is that every key a payload has is one its type declares,
with the type it declares, and that the keys Mangum reads to pick its handler are there.
"""

from __future__ import annotations

import base64
import json
import types
import typing
from collections.abc import Mapping

import pytest
from siglip_text.aws import types as aws_types
from siglip_text.aws.events import rest_proxy_event
from siglip_text.aws.function import LambdaFunction
from siglip_text.aws.types import (
    FunctionUrlEvent,
    HttpApiEvent,
    HttpApiRequestContext,
    LambdaContext,
    ProxyResponse,
    RestApiEvent,
    RestRequestContext,
)

from devkit.aws_lambda import LambdaContext as DevkitContext
from devkit.aws_lambda import load_event
from devkit.events import event_files

EVENT_NAMES = [path.name for path in event_files()]


def mismatches(value: object, hint: object, where: str, *, closed: bool) -> list[str]:
    """Where ``value`` departs from the type ``hint``; ``closed``: a TypedDict's value may
    hold no key it does not declare (its nested ones may: AWS adds fields over time)."""
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        declared = typing.get_type_hints(hint)
        found = [f"{where}.{key}: not declared" for key in value if closed and key not in declared]
        for key in hint.__required_keys__:  # type: ignore[attr-defined]
            if key not in value:
                found.append(f"{where}.{key}: required, absent")
        for key, item in value.items():
            if key in declared:
                found += mismatches(item, declared[key], f"{where}.{key}", closed=False)
        return found
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        options = [mismatches(value, option, where, closed=closed) for option in args]
        return [] if any(not found for found in options) else min(options, key=len)
    if origin is typing.Literal:
        return [] if value in args else [f"{where}: {value!r} not one of {args}"]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        return [
            problem
            for key, item in value.items()
            for problem in mismatches(key, args[0], f"{where} key", closed=closed)
            + mismatches(item, args[1], f"{where}[{key!r}]", closed=closed)
        ]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not an array"]
        return [
            problem
            for i, item in enumerate(value)
            for problem in mismatches(item, args[0], f"{where}[{i}]", closed=closed)
        ]
    assert isinstance(hint, type), f"{where}: no check written for {hint!r}"
    if hint is int and isinstance(value, bool):
        return [f"{where}: a boolean, not an integer"]
    return [] if isinstance(value, hint) else [f"{where}: {type(value).__name__}, not {hint}"]


def shape_of(event: Mapping[str, object]) -> type:
    """The type an event has, chosen as Mangum chooses its handler: payload format 2.0 by
    ``version``, a REST API (1.0) event by ``resource``."""
    if event.get("version") == "2.0":
        return HttpApiEvent
    assert "resource" in event, "neither a v2 event nor a REST API one"
    return RestApiEvent


def test_the_function_url_event_is_the_http_apis_payload_format() -> None:
    assert FunctionUrlEvent is HttpApiEvent


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_every_event_file_has_only_the_keys_its_type_declares_of_the_declared_types(
    name: str,
) -> None:
    event = load_event(name)
    shape = shape_of(event)
    assert mismatches(event, shape, name, closed=True) == []
    # the keys Mangum reads to route it are present, in the nested context too
    context = event["requestContext"]
    if shape is HttpApiEvent:
        assert {"version", "rawPath", "headers", "requestContext"} <= set(event)
        assert "http" in context and {"method", "path"} <= set(context["http"])
        # a v2 context has only the fields its type declares (a REST one has more: AWS's)
        assert set(context) <= set(typing.get_type_hints(HttpApiRequestContext))
    else:
        assert {"resource", "path", "httpMethod", "headers", "requestContext"} <= set(event)
        assert {"resourcePath", "httpMethod", "path", "stage"} <= set(context)


@pytest.mark.parametrize("name", [n for n in EVENT_NAMES if n.startswith("url-")])
def test_function_url_events_route_by_default_as_their_payload_says(name: str) -> None:
    event = load_event(name)
    assert shape_of(event) is FunctionUrlEvent
    assert event["routeKey"] == event["requestContext"]["routeKey"] == "$default"


def test_the_event_the_function_sends_itself_is_a_rest_api_event() -> None:
    event = rest_proxy_event(
        "GET",
        "/health",
        headers={"User-Agent": "self"},
        body=None,
        stage="live",
        request_id="r-1",
    )
    assert set(event) == set(typing.get_type_hints(RestApiEvent))
    assert set(event["requestContext"]) == set(typing.get_type_hints(RestRequestContext))
    assert mismatches(event, RestApiEvent, "event", closed=True) == []


@pytest.fixture(scope="module")
def answers(lambda_module: LambdaFunction) -> dict[str, object]:
    return {name: lambda_module.handler(load_event(name), DevkitContext()) for name in EVENT_NAMES}


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_the_real_handlers_answer_is_a_proxy_response(
    answers: dict[str, object], name: str
) -> None:
    answer = answers[name]
    assert mismatches(answer, ProxyResponse, "response", closed=True) == []
    # what API Gateway and function URLs need of it: a status and a body they can relay
    assert isinstance(answer, dict) and {"statusCode", "body", "isBase64Encoded"} <= set(answer)
    body = answer["body"]
    content = base64.b64decode(body) if answer["isBase64Encoded"] else body.encode()
    json.loads(content)


def test_a_malformed_event_is_answered_with_a_proxy_response_too(
    lambda_module: LambdaFunction,
) -> None:
    answer = lambda_module.handler({"requestContext": "nope"}, DevkitContext())
    assert mismatches(answer, ProxyResponse, "response", closed=True) == []
    assert answer["statusCode"] == 400


def test_the_tests_lambda_context_has_what_the_protocol_names() -> None:
    context = DevkitContext()
    declared = typing.get_type_hints(LambdaContext)
    assert set(declared) == {"function_name", "aws_request_id"}
    for name, hint in declared.items():
        assert isinstance(getattr(context, name), hint)
    assert isinstance(context.get_remaining_time_in_millis(), int)
    # statically too: mypy holds this assignment to the Protocol
    typed: LambdaContext = context
    assert typed.aws_request_id


def test_the_payload_types_declare_only_types_this_check_knows() -> None:
    # every TypedDict of the module resolves and is checked by `mismatches` (a new field of a
    # kind it cannot check fails here, not silently in the tests above)
    for value in vars(aws_types).values():
        if typing.is_typeddict(value):
            for name, hint in typing.get_type_hints(value).items():
                mismatches(None, hint, f"{value.__name__}.{name}", closed=False)
