"""One front door for both entry points (`http.front.Front`): each request authenticated
once, its body bounded once, admitted once, through the Lambda handler and through the app
`serve` runs; errors that name the fix (401: where the key comes from; 404: the ``/v1`` base
URL); any unexpected exception on the request path an OpenAI-shaped 500, never plain text.

The counts come from spies that call the real thing (the admission, the body-limit check,
the key check): what is counted is how often the front calls them.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mangum import Mangum
from siglip_text.assembly import Platform, build_app
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.admission import Admission
from siglip_text.http.app import create_app
from siglip_text.http.auth import ApiKeyAuthenticator
from siglip_text.http.errors import AuthenticationError
from siglip_text.settings import Settings

from devkit.aws_lambda import (
    LambdaContext,
    built_lambda,
    built_lambda_with_key,
    gateway_event,
    lambda_answer,
    load_event,
)
from devkit.hostile import Hostile
from devkit.keys import KEY
from devkit.openai_shapes import assert_openai_error
from devkit.paths import ROOT

BODY = json.dumps({"input": ["a red block", "a robot arm"]}).encode()
JSON = {"content-type": "application/json"}
REQUESTS = 3


class Keys:
    """A key check that accepts `KEY` and counts how often it is asked."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, authorization: str | None) -> None:
        self.calls += 1
        if authorization != f"Bearer {KEY}":
            raise AuthenticationError("Incorrect API key provided.")


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts of admissions taken, of `Admission` objects that took them, and of body-limit
    checks, wherever the runtime looks the check up."""
    counts: Counter[str] = Counter()
    seen: set[int] = set()
    real_admit = Admission.admit

    def admit(self: Admission) -> Any:
        counts["admissions"] += 1
        seen.add(id(self))
        counts["admission objects"] = len(seen)
        return real_admit(self)

    monkeypatch.setattr(Admission, "admit", admit)
    for name in ("siglip_text.http.gate", "siglip_text.http.front", "siglip_text.http.app"):
        module = importlib.import_module(name)
        real = getattr(module, "declares_more_than", None)
        if real is not None:
            monkeypatch.setattr(module, "declares_more_than", _counting(real, counts, "bounds"))
    return counts


def _counting(real: Callable[..., Any], counts: Counter[str], key: str) -> Callable[..., Any]:
    def spy(*args: Any, **kwargs: Any) -> Any:
        counts[key] += 1
        return real(*args, **kwargs)

    return spy


def test_serve_authenticates_bounds_and_admits_each_request_once(
    service: EmbeddingService, settings: Settings, spies: Counter[str]
) -> None:
    # GIVEN the app `serve` runs on loopback, with a key check that counts its calls
    keys = Keys()
    app = build_app(service, settings, Platform.SERVE, authenticator=keys)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        # WHEN requests with a key and a body come in
        for _ in range(REQUESTS):
            headers = {**JSON, "authorization": f"Bearer {KEY}"}
            response = client.post("/v1/embeddings", content=BODY, headers=headers)
            assert response.status_code == 200, response.text
        # THEN each was authenticated once, its body bounded once and admitted once, by one
        # admission for the whole server
        assert keys.calls == REQUESTS
        assert spies["bounds"] == REQUESTS
        assert spies["admissions"] == REQUESTS
        assert spies["admission objects"] == 1
        # AND a request without a body is authenticated once and takes no admission
        models = client.get("/v1/models", headers={"authorization": f"Bearer {KEY}"})
        assert models.status_code == 200
        assert keys.calls == REQUESTS + 1
        assert spies["admissions"] == REQUESTS


@pytest.fixture
def lambda_with_api_key(demo_dir: Path) -> Iterator[ModuleType]:
    with built_lambda_with_key(demo_dir, KEY) as function:
        yield function


def test_lambda_authenticates_bounds_and_admits_each_request_once(
    lambda_with_api_key: ModuleType, spies: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the Lambda entry point with api-key auth (the real authenticator, its secret in
    # moto), its key checks counted
    checks: Counter[str] = Counter()
    real_check = ApiKeyAuthenticator.__call__

    def check(self: ApiKeyAuthenticator, authorization: str | None) -> None:
        checks["keys"] += 1
        real_check(self, authorization)

    monkeypatch.setattr(ApiKeyAuthenticator, "__call__", check)
    # WHEN events with a key and a body come in, through REST, HTTP API and function URLs
    names = [f"{kind}-embeddings-with-api-key.json" for kind in ("rest", "http", "url")]
    for name in names:
        result = lambda_with_api_key.handler(load_event(name), LambdaContext())
        assert result["statusCode"] == 200, result["body"][:300]
    # THEN each was authenticated once, its body bounded once and admitted once
    assert checks["keys"] == len(names)
    assert spies["bounds"] == len(names)
    assert spies["admissions"] == len(names)
    assert spies["admission objects"] == 1


def test_a_missing_or_wrong_key_is_told_where_keys_come_from(
    service: EmbeddingService, settings: Settings
) -> None:
    app = create_app(service, settings, authenticator=Keys())
    with TestClient(app) as client:
        for headers in ({}, {"authorization": "Bearer sk-wrong-0123456789abcdef"}):
            response = client.post("/v1/embeddings", content=BODY, headers={**JSON, **headers})
            assert response.status_code == 401
            error = response.json()
            assert_openai_error(error)
            message = error["error"]["message"]
            # THEN the message points at the docs section that says where a key comes from
            link = re.search(r"docs/(\w+\.md)#([\w-]+)", message)
            assert link is not None, message
            assert "ApiKeySecretArn" in message
            assert _anchors(ROOT / "docs" / link[1]) >= {link[2]}


def _anchors(page: Path) -> set[str]:
    """The anchors of a Markdown page's headings, as GitHub makes them."""
    found = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


@pytest.mark.parametrize(
    ("method", "path", "route"),
    [("POST", "/embeddings", "POST /v1/embeddings"), ("GET", "/models", "GET /v1/models")],
)
def test_a_path_without_v1_gets_a_404_that_names_the_v1_base_url(
    service: EmbeddingService,
    settings: Settings,
    demo_dir: Path,
    method: str,
    path: str,
    route: str,
) -> None:
    # GIVEN a client whose base URL lacks /v1, in process and through the Lambda handler
    with built_lambda(demo_dir) as module:
        event = gateway_event(
            load_event("http-embeddings-text.json"),
            Hostile("no-v1", BODY if method == "POST" else b""),
            base64_body=False,
            path=path,
        )
        event["requestContext"]["http"]["method"] = method
        via_lambda = lambda_answer(module.handler(event, LambdaContext()))
    with TestClient(create_app(service, settings)) as client:
        in_process = client.request(method, path, content=BODY if method == "POST" else None)
    for status, content in (
        (via_lambda[0], via_lambda[2]),
        (in_process.status_code, in_process.content),
    ):
        # THEN a 404 in OpenAI's shape names the route to use and the /v1 base URL
        assert status == 404
        error = json.loads(content)
        assert_openai_error(error)
        assert error["error"]["code"] == "not_found"
        assert f"use {route}" in error["error"]["message"]
        assert "base URL that ends in /v1" in error["error"]["message"]


class BrokenObserver:
    """An observer whose every call fails: an exception no one expected, on the request path."""

    def embeddings_served(self, **_: Any) -> None:
        raise ValueError("observer broke: 'my private query'")

    def request_failed(self, **_: Any) -> None:
        raise ValueError("observer broke")


def _faulty_key_check(authorization: str | None) -> None:
    raise OverflowError("cannot convert float infinity to integer")


@pytest.mark.parametrize("offload", [True, False], ids=["serve", "lambda"])
@pytest.mark.parametrize("fault", ["key check", "observer"])
def test_an_unexpected_exception_on_the_request_path_is_an_openai_shaped_500(
    service: EmbeddingService,
    settings: Settings,
    offload: bool,
    fault: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # GIVEN the app as either entry point builds it, with a key check or an observer that
    # raises what nothing catches on the way
    app = create_app(
        service,
        settings,
        offload_inference=offload,
        authenticator=_faulty_key_check if fault == "key check" else None,
        observer=BrokenObserver() if fault == "observer" else None,  # type: ignore[arg-type]
    )
    headers = {**JSON, "authorization": f"Bearer {KEY}"}
    # WHEN a request comes in, through ASGI (serve) and through Mangum (Lambda)
    with caplog.at_level(logging.ERROR), TestClient(app, raise_server_exceptions=False) as client:
        answers = [client.post("/v1/embeddings", content=BODY, headers=headers)]
    handler = Mangum(app, lifespan="off")
    event = gateway_event(
        load_event("rest-embeddings-text.json"),
        Hostile("x", BODY, headers=tuple(headers.items())),
        base64_body=False,
    )
    status, answer_headers, content = lambda_answer(handler(event, LambdaContext()))
    # THEN each is a 500 in OpenAI's shape that says nothing of the cause
    for got_status, content_type, text in [
        (r.status_code, r.headers["content-type"], r.text) for r in answers
    ] + [(status, answer_headers["content-type"], content.decode())]:
        assert got_status == 500, text
        assert content_type.startswith("application/json")
        error = json.loads(text)
        assert_openai_error(error)
        assert error["error"]["message"] == "The server had an error while processing your request."
        assert "infinity" not in text and "observer" not in text
    # AND the cause is logged for the operator, scrubbed (no quoted text)
    logged = caplog.text
    assert ("OverflowError" if fault == "key check" else "ValueError") in logged
    assert "my private query" not in logged


def test_a_body_on_a_route_that_takes_none_is_refused_unread(
    service: EmbeddingService, settings: Settings
) -> None:
    # GIVEN bodies sent where no route takes one, answered before the app reads anything
    app = create_app(service, settings)
    cases = [
        ("POST", "/health", 405),  # a route, another method
        ("GET", "/health", 413),  # a route that takes no body
        ("PUT", "/v1/nothing", 404),  # no route
    ]
    with TestClient(app) as client:
        for method, path, status in cases:
            response = client.request(method, path, content=BODY, headers=JSON)
            assert response.status_code == status, (method, path, response.text)
            assert_openai_error(response.json())
            assert response.headers["connection"] == "close"
