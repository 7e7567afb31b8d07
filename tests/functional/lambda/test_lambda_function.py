"""Every file in events/ through the real Lambda entry point (Mangum -> FastAPI -> ORT)."""

from __future__ import annotations

import base64
import json
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from devkit.aws_lambda import LambdaContext, expected_status, load_event
from devkit.openai_shapes import assert_openai_error, assert_openai_response, decode_base64
from devkit.paths import EVENTS

EVENT_FILES = sorted(p.name for p in EVENTS.glob("*.json"))


def invoke(module: ModuleType, event: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    result = module.handler(event, LambdaContext())
    body = result["body"]
    if result.get("isBase64Encoded"):
        body = base64.b64decode(body).decode()
    headers = {k.lower(): v for k, v in (result.get("headers") or {}).items()}
    for key, values in (result.get("multiValueHeaders") or {}).items():
        headers[key.lower()] = values[-1]
    return result["statusCode"], headers, json.loads(body)


def test_events_cover_rest_http_api_and_function_url_health_embeddings_and_a_bad_request() -> None:
    kinds = {tuple(n.removesuffix(".json").split("-")[:2]) for n in EVENT_FILES}
    frontends = ("rest", "http", "url")
    assert {(f, route) for f in frontends for route in ("health", "embeddings")} <= kinds
    for frontend in frontends:
        assert f"{frontend}-embeddings-bad-request.json" in EVENT_FILES
    for name in ("base64-body", "with-api-key", "wrong-api-key"):
        assert f"url-embeddings-{name}.json" in EVENT_FILES


@pytest.mark.parametrize("name", EVENT_FILES)
def test_event_file_gets_its_expected_answer(lambda_module: ModuleType, name: str) -> None:
    status, headers, body = invoke(lambda_module, load_event(name))
    assert status == expected_status(name), body
    assert headers["content-type"].startswith("application/json")
    if status != 200:
        assert_openai_error(body)
    elif "embeddings" in name:
        assert_openai_response(body)
        assert body["model"] == lambda_module.parts.service.model_id
    else:
        assert body["status"] == "ok"


def test_rest_http_api_and_function_url_events_give_identical_vectors(
    lambda_module: ModuleType,
) -> None:
    _, _, rest = invoke(lambda_module, load_event("rest-embeddings-text.json"))
    _, _, http = invoke(lambda_module, load_event("http-embeddings-text.json"))
    _, _, url = invoke(lambda_module, load_event("url-embeddings-text.json"))
    assert rest["data"] == http["data"] == url["data"]
    expected = lambda_module.parts.service.embed_texts(["a photo of a cat"]).vectors[0]
    np.testing.assert_allclose(np.array(rest["data"][0]["embedding"]), expected, atol=1e-7)


def test_base64_encoded_request_body_is_decoded(lambda_module: ModuleType) -> None:
    event = load_event("rest-embeddings-base64-body.json")
    assert event["isBase64Encoded"] is True
    status, _, body = invoke(lambda_module, event)
    assert status == 200 and len(body["data"]) == 1


def test_function_url_base64_body_is_decoded_and_answers_base64_vectors(
    lambda_module: ModuleType,
) -> None:
    # GIVEN what a function URL sends for a binary content type: the body base64-encoded
    event = load_event("url-embeddings-base64-body.json")
    assert event["isBase64Encoded"] is True
    assert event["headers"]["content-type"] == "application/octet-stream"
    request = json.loads(base64.b64decode(event["body"]))
    # WHEN the handler serves it
    status, _, body = invoke(lambda_module, event)
    # THEN the vectors are those of the decoded request's texts, in order, as base64
    assert status == 200
    expected = lambda_module.parts.service.embed_texts(request["input"]).vectors
    got = np.stack([decode_base64(item["embedding"]) for item in body["data"]])
    np.testing.assert_allclose(got, expected, atol=1e-7)


def test_function_url_events_have_the_payload_format_a_function_url_sends() -> None:
    # Powertools' model of the function URL event (payload format 2.0, with $default as the
    # route key and stage: a function URL has no routes), not API Gateway's HTTP API event.
    from aws_lambda_powertools.utilities.parser.models import LambdaFunctionUrlModel

    names = [n for n in EVENT_FILES if n.startswith("url-")]
    assert len(names) >= 5
    for name in names:
        event = load_event(name)
        parsed = LambdaFunctionUrlModel(**event)
        assert parsed.version == "2.0" and parsed.routeKey == "$default", name
        assert parsed.requestContext.stage == "$default", name
        assert event["requestContext"]["domainName"].endswith(".lambda-url.us-east-1.on.aws")
        assert event["headers"]["host"] == event["requestContext"]["domainName"]
        assert all(key == key.lower() for key in event["headers"]), name  # as sent: lowercase


@pytest.mark.parametrize("name", [n for n in EVENT_FILES if n.startswith("url-")])
def test_function_url_responses_are_in_the_format_a_function_url_reads(
    lambda_module: ModuleType, name: str
) -> None:
    # A function URL maps statusCode, headers, body, isBase64Encoded and cookies to HTTP;
    # API Gateway v1's multiValueHeaders are not part of that format (they would be lost).
    result = lambda_module.handler(load_event(name), LambdaContext())
    assert set(result) <= {"statusCode", "headers", "body", "isBase64Encoded", "cookies"}
    assert isinstance(result["statusCode"], int) and isinstance(result["body"], str)
    assert result["headers"]["content-type"].startswith("application/json")


def test_function_url_request_id_becomes_the_log_correlation_id(lambda_module: ModuleType) -> None:
    # The handler's correlation path (requestContext.requestId) exists in function URL
    # events too: every log line of the request carries the id the URL's logs show.
    for name in ("url-embeddings-bad-request.json", "url-health.json"):
        event = load_event(name)
        invoke(lambda_module, event)
        assert lambda_module.logger.get_correlation_id() == event["requestContext"]["requestId"]


def test_base64_encoding_format_through_the_handler(lambda_module: ModuleType) -> None:
    status, _, body = invoke(lambda_module, load_event("rest-embeddings-base64.json"))
    assert status == 200
    vector = decode_base64(body["data"][0]["embedding"])
    assert vector.shape == (32,) and abs(float(np.linalg.norm(vector)) - 1) < 1e-6


def test_handler_emits_metrics_and_no_query_text(lambda_module: ModuleType, capsys) -> None:
    event = load_event("rest-embeddings-text.json")
    body = json.loads(event["body"])
    body["input"] = "zebra-secret-query on a beach"
    event["body"] = json.dumps(body)
    status, _, _ = invoke(lambda_module, event)
    assert status == 200
    out = capsys.readouterr().out
    assert "EmbeddingLatency" in out and "Tokens" in out
    assert "zebra-secret-query" not in out


@pytest.mark.parametrize("name", ["rest-embeddings-text.json", "http-embeddings-text.json"])
def test_empty_string_through_the_handler(lambda_module: ModuleType, name: str) -> None:
    """Both event formats embed "" (<eos> then pads); an empty token array stays a 400."""
    service = lambda_module.parts.service
    event = load_event(name)
    event["body"] = json.dumps({"input": ["", "<eos>"]})
    status, _, body = invoke(lambda_module, event)
    assert status == 200, body
    expected = service.embed_texts(["", "<eos>"]).vectors
    got = np.array([item["embedding"] for item in body["data"]])
    np.testing.assert_allclose(got, expected, atol=1e-6)
    eos = service.tokenizer.eos_id
    np.testing.assert_allclose(got[0], service.embed_token_ids([[eos]]).vectors[0], atol=1e-6)
    event["body"] = json.dumps({"input": [[]]})
    status, _, body = invoke(lambda_module, event)
    assert status == 400 and body["error"]["param"] == "input"
