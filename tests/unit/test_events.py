"""The REST proxy event the function sends itself (aws/events.py), read back the way the
function reads every gateway event: through Mangum, into the real app."""

from __future__ import annotations

import json

from mangum import Mangum
from siglip_text.aws.events import rest_proxy_event
from siglip_text.engine.config import Settings
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app

from tests.support.aws_lambda import LambdaContext


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
