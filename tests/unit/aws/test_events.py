"""Lambda proxy events (aws/events.py): the REST proxy event the function sends itself, read
back the way the function reads every gateway event (through Mangum, into the real app), and
the check of every incoming event before Mangum reads it."""

from __future__ import annotations

import base64
import json

import pytest
from mangum import Mangum
from siglip_text.aws.events import as_mangum_reads, proxy_response, rest_proxy_event
from siglip_text.engine.errors import InvalidInputError
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.http.errors import InvalidHostError, error_answer
from siglip_text.settings import Settings

from devkit.aws_lambda import LambdaContext
from devkit.paths import EVENTS


def test_the_event_carries_the_request_as_api_gateway_would(
    service: EmbeddingService, settings: Settings
) -> None:
    # GIVEN a request for the embeddings endpoint, as the warm-up and the deploy hook send it
    body = json.dumps({"model": service.model_id, "input": ["a red block"]})
    event = rest_proxy_event(
        "POST",
        "/v1/embeddings",
        headers={"Content-Type": "application/json", "User-Agent": "self"},
        body=body,
        stage="live",
        request_id="req-1",
    )

    # WHEN the function's ASGI adapter hands it to the app
    answer = Mangum(create_app(service, settings), lifespan="off")(event, LambdaContext())

    # THEN the app answers it like any gateway request
    assert answer["statusCode"] == 200, answer["body"][:300]
    assert json.loads(answer["body"])["data"][0]["object"] == "embedding"
    assert event["requestContext"]["identity"] == {"sourceIp": "127.0.0.1", "userAgent": "self"}
    assert event["multiValueHeaders"]["Content-Type"] == ["application/json"]


# --- what Mangum can read of an incoming event (as_mangum_reads) ---------------------------


def test_an_ordinary_event_reaches_mangum_as_it_came() -> None:
    # GIVEN each event file (every gateway's shape, bodies plain and base64)
    for path in EVENTS.glob("*.json"):
        event = json.loads(path.read_text())
        # WHEN it is checked
        readable = as_mangum_reads(event)
        # THEN nothing but a base64 body changes: its bytes, decoded once, for Mangum
        if event.get("isBase64Encoded"):
            assert readable["body"] == base64.b64decode(event["body"]), path.name
            assert readable["isBase64Encoded"] is False
            readable = {**readable, "body": event["body"], "isBase64Encoded": True}
        assert readable == event, path.name


def test_only_the_header_mangum_cannot_parse_is_left_out_of_its_view() -> None:
    event = json.loads((EVENTS / "rest-embeddings-text.json").read_text())
    event["headers"]["X-Forwarded-Port"] = "443,80"
    event["multiValueHeaders"]["X-Forwarded-Port"] = ["443", "80"]

    readable = as_mangum_reads(event)

    assert "X-Forwarded-Port" not in readable["headers"]
    assert "X-Forwarded-Port" not in readable["multiValueHeaders"]
    assert readable["headers"] == {
        k: v for k, v in event["headers"].items() if k != "X-Forwarded-Port"
    }
    assert event["headers"]["X-Forwarded-Port"] == "443,80"  # the caller's event untouched


@pytest.mark.parametrize("host", ["h:notaport", "a:1:2", "h:+", "[::1]:x"])
def test_a_host_whose_port_is_no_number_is_refused(host: str) -> None:
    event = json.loads((EVENTS / "url-health.json").read_text())
    event["headers"]["host"] = host
    with pytest.raises(InvalidHostError, match="Host"):
        as_mangum_reads(event)


def test_the_refusal_is_a_proxy_response_in_openai_shape() -> None:
    with pytest.raises(InvalidInputError) as refused:
        as_mangum_reads({"body": "{}"})
    response = proxy_response(error_answer(refused.value))
    assert response["statusCode"] == 400 and response["isBase64Encoded"] is False
    assert response["headers"]["content-type"] == "application/json"
    assert json.loads(response["body"])["error"]["type"] == "invalid_request_error"
