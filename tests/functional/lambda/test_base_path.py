"""A custom domain with a base path: API Gateway routes ``https://<domain>/<base>/<route>`` to
the stage, and the REST event's ``path`` keeps ``/<base>``; Mangum strips the base path named
by ``SIGLIP_API_BASE_PATH`` (events/custom-domain/ holds such events)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from siglip_text.settings import load_settings

from devkit.aws_lambda import LambdaContext, built_lambda, lambda_answer
from devkit.paths import EVENTS

CUSTOM_DOMAIN = EVENTS / "custom-domain"


def event(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((CUSTOM_DOMAIN / name).read_text())
    return loaded


def answer(module: ModuleType, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    status, _, body = lambda_answer(module.handler(event, LambdaContext()))
    return status, json.loads(body)


@pytest.fixture(scope="module")
def mapped(demo_dir: Path) -> Iterator[ModuleType]:
    with built_lambda(demo_dir, SIGLIP_API_BASE_PATH="siglip") as module:
        yield module


def test_base_path_events_carry_the_base_path_and_the_route_as_api_gateway_sends_them() -> None:
    for name in ("rest-embeddings-text.json", "rest-health.json"):
        sent = event(name)
        assert sent["path"] == "/siglip" + sent["resource"]
        assert sent["requestContext"]["domainName"] == "api.example.com"


@pytest.mark.parametrize("name", ["rest-embeddings-text.json", "rest-health.json"])
def test_requests_through_a_base_path_mapping_are_served(mapped: ModuleType, name: str) -> None:
    status, body = answer(mapped, event(name))
    assert status == 200, body
    assert body.get("object") == "list" or body.get("status") == "ok"


def test_base_path_and_execute_api_requests_get_the_same_vector(mapped: ModuleType) -> None:
    _, through_domain = answer(mapped, event("rest-embeddings-text.json"))
    _, direct = answer(mapped, json.loads((EVENTS / "rest-embeddings-text.json").read_text()))
    assert through_domain["data"] == direct["data"]


def test_without_the_setting_a_base_path_request_is_an_openai_shaped_404(
    demo_dir: Path,
) -> None:
    with built_lambda(demo_dir, SIGLIP_API_BASE_PATH="") as module:
        status, body = answer(module, event("rest-embeddings-text.json"))
    assert status == 404 and body["error"]["code"] == "not_found"


@pytest.mark.parametrize("value", ["siglip", "/siglip", "/siglip/", " siglip/ "])
def test_base_path_setting_takes_any_slashes(value: str) -> None:
    assert load_settings(api_base_path=value).api_base_path == "/siglip"
    assert load_settings(api_base_path="/").api_base_path is None
