"""`aws.events.as_mangum_reads`: each event shape Mangum cannot read is a 400 (an
`InvalidInputError`) that names the event's shape and the field, before any work."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from siglip_text.aws.events import as_mangum_reads
from siglip_text.engine.errors import InvalidInputError

from devkit.aws_lambda import load_event

REST, V2, URL = "rest-embeddings-text.json", "http-embeddings-text.json", "url-embeddings-text.json"
Shape = Callable[[dict[str, Any]], None]


def setting(*path: str, value: Any) -> Shape:
    def shape(event: dict[str, Any]) -> None:
        holder = event
        for name in path[:-1]:
            holder = holder[name]
        holder[path[-1]] = value

    return shape


def dropping(name: str) -> Shape:
    return lambda event: event.pop(name)


CASES: dict[str, tuple[str, Shape, str]] = {
    "multi-host-number": (REST, setting("multiValueHeaders", "Host", value=[1]), "multiValue"),
    "multi-host-null": (REST, setting("multiValueHeaders", "Host", value=[None]), "multiValue"),
    "multi-port-nested": (
        REST,
        setting("multiValueHeaders", "X-Forwarded-Port", value=[["a"]]),
        "multiValue",
    ),
    "header-null": (V2, setting("headers", "x-a", value=None), "headers"),
    "header-number": (REST, setting("headers", "x-a", value=3), "headers"),
    "header-surrogate": (URL, setting("headers", "x-a", value="a\ud800"), "headers"),
    "header-name-surrogate": (V2, setting("headers", "x-\udfff", value="a"), "headers"),
    "body-surrogate": (REST, setting("body", value='{"input": "\ud800"}'), "body"),
    "body-number": (V2, setting("body", value=3), "body"),
    "body-object": (URL, setting("body", value={"input": "x"}), "body"),
    "body-list": (REST, setting("body", value=["x"]), "body"),
    "raw-query-null": (V2, setting("rawQueryString", value=None), "rawQueryString"),
    "cookies-numbers": (URL, setting("cookies", value=[1, 2]), "cookies"),
    "cookies-string": (V2, setting("cookies", value="a=b"), "cookies"),
    "query-list": (REST, setting("queryStringParameters", value=["a"]), "queryString"),
    "query-number-value": (REST, setting("queryStringParameters", value={"a": 1}), "queryString"),
    "rest-without-resource": (REST, dropping("resource"), "neither a version"),
    "path-surrogate": (REST, setting("path", value="/v1/\ud800"), "path"),
    "v2-path-number": (V2, setting("requestContext", "http", "path", value=1), "http.path"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_event_mangum_cannot_read_is_refused_naming_its_shape_and_field(case: str) -> None:
    template, shape, field = CASES[case]
    event = load_event(template)
    shape(event)
    with pytest.raises(InvalidInputError) as refused:
        as_mangum_reads(event)
    message = refused.value.message
    assert field in message, message
    if "resource" not in case:
        expected = "REST API v1" if template == REST else "HTTP API v2 or function URL"
        assert expected in message, message
