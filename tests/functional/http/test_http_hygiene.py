"""HTTP's rules on both entry points: HEAD for the GET routes (RFC 9110 section 9.1), 415 for
a content coding the server does not read (section 15.5.16), one ``Authorization`` header
(section 5.3: not a list field), and an OpenAPI schema without the package's version."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from siglip_text import __version__
from siglip_text.assembly import Platform, build_app
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.errors import AuthenticationError
from siglip_text.settings import Settings

from devkit.aws_lambda import (
    LambdaContext,
    built_lambda_with_key,
    lambda_answer,
    load_event,
)
from devkit.keys import KEY
from devkit.openai_shapes import assert_openai_error

BODY = json.dumps({"input": "a red block"}).encode()
GATEWAYS = ("rest", "url")


def event(gateway: str, method: str, path: str, **headers: str) -> dict[str, Any]:
    """A gateway event for ``method path`` with ``headers`` added, from the event files."""
    base = load_event(
        f"{gateway}-embeddings-text.json" if method == "POST" else f"{gateway}-health.json"
    )
    if gateway == "url":
        base["requestContext"]["http"]["method"] = method
        base["rawPath"] = base["requestContext"]["http"]["path"] = path
        base["headers"].update(headers)
    else:
        base["httpMethod"] = base["requestContext"]["httpMethod"] = method
        base["path"] = base["resource"] = base["requestContext"]["path"] = path
        base["headers"].update(headers)
        base["multiValueHeaders"].update({k: [v] for k, v in headers.items()})
    return base


def invoke(module: ModuleType, lambda_event: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    return lambda_answer(module.handler(lambda_event, LambdaContext()))


# --- HEAD ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/health", "/v1/models"])
def test_head_gets_the_get_status_and_headers_without_content(
    client: TestClient, path: str
) -> None:
    got = client.get(path)
    head = client.head(path)
    assert head.status_code == 200 == got.status_code
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]


@pytest.mark.parametrize("gateway", GATEWAYS)
@pytest.mark.parametrize("path", ["/health", "/v1/models"])
def test_head_through_the_lambda_handler(
    lambda_module: ModuleType, gateway: str, path: str
) -> None:
    status, headers, body = invoke(lambda_module, event(gateway, "HEAD", path))
    assert status == 200 and body == b""
    assert headers["content-type"] == "application/json"


def test_head_through_serve(live_server: str) -> None:
    for path in ("/health", "/v1/models"):
        response = httpx.head(f"{live_server}{path}")
        assert response.status_code == 200 and response.content == b""


def test_a_post_to_health_names_get_and_head_in_allow(client: TestClient) -> None:
    response = client.post("/health", content=b"{}", headers={"content-type": "application/json"})
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"


# --- Content-Encoding ------------------------------------------------------------------------


def test_a_gzip_body_is_a_415_that_names_the_coding_accepted(client: TestClient) -> None:
    response = client.post(
        "/v1/embeddings",
        content=gzip.compress(BODY),
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )
    assert response.status_code == 415, response.text
    assert_openai_error(response.json())
    assert response.json()["error"]["code"] == "unsupported_content_encoding"
    assert response.headers["accept-encoding"] == "identity"
    plain = {"content-type": "application/json", "content-encoding": "identity"}
    assert client.post("/v1/embeddings", content=BODY, headers=plain).status_code == 200


@pytest.mark.parametrize("gateway", GATEWAYS)
def test_a_gzip_body_is_a_415_through_the_lambda_handler(
    lambda_module: ModuleType, gateway: str
) -> None:
    sent = event(gateway, "POST", "/v1/embeddings", **{"content-encoding": "gzip"})
    sent["body"], sent["isBase64Encoded"] = base64.b64encode(gzip.compress(BODY)).decode(), True
    status, headers, body = invoke(lambda_module, sent)
    assert status == 415, body
    assert_openai_error(json.loads(body))
    assert headers["accept-encoding"] == "identity"


def test_a_gzip_body_is_a_415_through_serve(live_server: str) -> None:
    response = httpx.post(
        f"{live_server}/v1/embeddings",
        content=gzip.compress(BODY),
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )
    assert response.status_code == 415
    assert_openai_error(response.json())


# --- /openapi.json ---------------------------------------------------------------------------


def test_the_openapi_schema_does_not_carry_the_package_version(client: TestClient) -> None:
    response = client.get("/openapi.json")
    assert response.status_code == 200
    assert response.json()["info"]["version"] == "v1"
    assert __version__ not in response.text


@pytest.mark.parametrize("gateway", GATEWAYS)
def test_the_openapi_schema_through_the_lambda_handler(
    lambda_module: ModuleType, gateway: str
) -> None:
    status, _, body = invoke(lambda_module, event(gateway, "GET", "/openapi.json"))
    assert status == 200 and __version__ not in body.decode()


# --- a doubled Authorization -----------------------------------------------------------------


class Keys:
    """An authenticator that accepts `KEY` only."""

    def __call__(self, authorization: str | None) -> None:
        if authorization != f"Bearer {KEY}":
            raise AuthenticationError("Incorrect API key provided.")


def assert_doubled_authorization(status: int, body: bytes) -> None:
    assert status == 400, body
    error = json.loads(body)["error"]
    assert_openai_error({"error": error})
    assert error["param"] == "Authorization" and error["code"] == "invalid_header"
    assert "Authorization header is sent more than once" in error["message"]


@pytest.mark.parametrize("order", ["right first", "wrong first"])
@pytest.mark.parametrize("path", ["/v1/embeddings", "/v1/models"])
def test_serve_answers_a_doubled_authorization_with_a_400_in_either_order(
    service: EmbeddingService, settings: Settings, order: str, path: str
) -> None:
    # GIVEN the app `serve` runs, checking keys
    app = build_app(service, settings, Platform.SERVE, host="127.0.0.1", authenticator=Keys())
    pair = [("authorization", f"Bearer {KEY}"), ("authorization", "Bearer wrong")]
    if order == "wrong first":
        pair.reverse()
    with TestClient(app, base_url="http://127.0.0.1") as client:
        # WHEN a request carries two Authorization headers, the right key in one of them
        headers = [("content-type", "application/json"), *pair]
        if path == "/v1/embeddings":
            response = client.post(path, content=BODY, headers=headers)
        else:
            response = client.get(path, headers=headers)
        # THEN it is a 400 naming the header, whichever comes first
        assert_doubled_authorization(response.status_code, response.content)
        one = [("content-type", "application/json"), ("authorization", f"Bearer {KEY}")]
        assert client.post("/v1/embeddings", content=BODY, headers=one).status_code == 200


@pytest.fixture(scope="module")
def lambda_with_api_key(demo_dir: Path) -> Iterator[ModuleType]:
    with built_lambda_with_key(demo_dir, KEY) as module:
        yield module


@pytest.mark.parametrize("order", ["right first", "wrong first"])
def test_lambda_answers_a_doubled_authorization_with_a_400_in_either_order(
    lambda_with_api_key: ModuleType, order: str
) -> None:
    values = [f"Bearer {KEY}", "Bearer wrong"]
    if order == "wrong first":
        values.reverse()
    # GIVEN a REST API event whose multi-value headers hold both (Mangum joins them) ...
    rest = event("rest", "POST", "/v1/embeddings")
    rest["headers"]["Authorization"] = values[-1]
    rest["multiValueHeaders"]["Authorization"] = values
    # ... and a function URL event, which joins duplicate headers with a comma itself
    url = event("url", "POST", "/v1/embeddings", authorization=",".join(values))
    for sent in (rest, url):
        # WHEN it is invoked THEN the answer is the same 400 as serve's
        assert_doubled_authorization(*invoke(lambda_with_api_key, sent)[::2])
    one = event("url", "POST", "/v1/embeddings", authorization=f"Bearer {KEY}")
    assert invoke(lambda_with_api_key, one)[0] == 200
