"""Every file in events/ through the real Lambda entry point (Mangum -> FastAPI -> ORT)."""

from __future__ import annotations

import base64
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from siglip_text.config import get_settings

from tests.support.aws_lambda import LambdaContext, expected_status, load_event
from tests.support.openai_shapes import assert_openai_error, assert_openai_response, decode_base64
from tests.support.paths import EVENTS

EVENT_FILES = sorted(p.name for p in EVENTS.glob("*.json"))


@pytest.fixture(scope="module")
def lambda_module(demo_dir: Path) -> ModuleType:
    patch = pytest.MonkeyPatch()
    patch.setenv("SIGLIP_MODEL_DIR", str(demo_dir))
    patch.setenv("SIGLIP_ORT_INTRA_OP_THREADS", "1")
    patch.setenv("SIGLIP_AUTH_MODE", "none")
    patch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    patch.setenv("POWERTOOLS_METRICS_NAMESPACE", "SiglipTextTest")
    get_settings.cache_clear()
    sys.modules.pop("siglip_text.lambda_function", None)
    module = importlib.import_module("siglip_text.lambda_function")
    yield module
    sys.modules.pop("siglip_text.lambda_function", None)
    get_settings.cache_clear()
    patch.undo()


def invoke(module: ModuleType, event: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    result = module.handler(event, LambdaContext())
    body = result["body"]
    if result.get("isBase64Encoded"):
        body = base64.b64decode(body).decode()
    headers = {k.lower(): v for k, v in (result.get("headers") or {}).items()}
    for key, values in (result.get("multiValueHeaders") or {}).items():
        headers[key.lower()] = values[-1]
    return result["statusCode"], headers, json.loads(body)


def test_events_cover_rest_and_http_api_health_embeddings_and_a_bad_request() -> None:
    kinds = {tuple(n.removesuffix(".json").split("-")[:2]) for n in EVENT_FILES}
    assert {
        ("rest", "health"),
        ("http", "health"),
        ("rest", "embeddings"),
        ("http", "embeddings"),
    } <= kinds
    assert any("bad-request" in n for n in EVENT_FILES)


@pytest.mark.parametrize("name", EVENT_FILES)
def test_event_file_gets_its_expected_answer(lambda_module: ModuleType, name: str) -> None:
    status, headers, body = invoke(lambda_module, load_event(name))
    assert status == expected_status(name), body
    assert headers["content-type"].startswith("application/json")
    if status != 200:
        assert_openai_error(body)
    elif "embeddings" in name:
        assert_openai_response(body)
        assert body["model"] == lambda_module.app.state.service.model_id
    else:
        assert body["status"] == "ok"


def test_rest_and_http_api_events_give_identical_vectors(lambda_module: ModuleType) -> None:
    _, _, rest = invoke(lambda_module, load_event("rest-embeddings-text.json"))
    _, _, http = invoke(lambda_module, load_event("http-embeddings-text.json"))
    assert rest["data"] == http["data"]
    expected = lambda_module.app.state.service.embed_texts(["a photo of a cat"]).vectors[0]
    np.testing.assert_allclose(np.array(rest["data"][0]["embedding"]), expected, atol=1e-7)


def test_base64_encoded_request_body_is_decoded(lambda_module: ModuleType) -> None:
    event = load_event("rest-embeddings-base64-body.json")
    assert event["isBase64Encoded"] is True
    status, _, body = invoke(lambda_module, event)
    assert status == 200 and len(body["data"]) == 1


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
