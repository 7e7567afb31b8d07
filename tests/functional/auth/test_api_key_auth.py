"""Auth mode ``api-key``: the real app and demo model, keys in a moto Secrets Manager.

Secrets Manager calls are counted with a botocore event hook on the client the provider uses;
nothing of the authenticator is mocked.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.parameters import SecretsProvider
from fastapi.testclient import TestClient
from moto import mock_aws
from siglip_text.aws.function import LambdaFunction
from siglip_text.engine.errors import ConfigError
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.auth import build_authenticator
from siglip_text.settings import load_settings

from devkit.aws_lambda import LambdaContext, built_lambda, load_event
from devkit.keyed_apps import Clock, keyed_app
from devkit.keys import KEY, NEW_KEY
from devkit.openai_shapes import assert_openai_error, assert_openai_response
from devkit.paths import EVENTS

BODY = {"input": ["a red block", "a robot arm"]}


@dataclass
class SecretsManager:
    """A moto Secrets Manager with one secret and a counter of GetSecretValue calls."""

    client: Any
    arn: str
    reads: list[str] = field(default_factory=list)

    def provider(self) -> SecretsProvider:
        return SecretsProvider(boto3_client=self.client)

    def put(self, value: str) -> None:
        self.client.put_secret_value(SecretId=self.arn, SecretString=value)


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[SecretsManager]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("secretsmanager", region_name="us-east-1")
        arn = client.create_secret(Name="siglip-text/api-key", SecretString=KEY)["ARN"]
        manager = SecretsManager(client=client, arn=arn)
        client.meta.events.register(
            "before-parameter-build.secrets-manager.GetSecretValue",
            lambda **kwargs: manager.reads.append(kwargs["params"]["SecretId"]),
        )
        yield manager


def make_client(
    service: EmbeddingService,
    demo_dir: Path,
    secrets: SecretsManager,
    *,
    cache_seconds: int = 300,
    clock: Clock | None = None,
) -> TestClient:
    client, _ = keyed_app(
        service,
        demo_dir,
        secrets.arn,
        clock or Clock(),
        cache_seconds=cache_seconds,
        provider=secrets.provider(),
    )
    return client


def embed(client: TestClient, key: str | None) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return client.post("/v1/embeddings", json=BODY, headers=headers)


def assert_unauthorized(response: Any) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    body = response.json()
    assert_openai_error(body)
    assert body["error"]["code"] == "invalid_api_key"
    assert KEY not in response.text and NEW_KEY not in response.text


def test_request_without_a_key_is_401_in_openai_shape(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsManager
) -> None:
    client = make_client(service, demo_dir, secrets)
    assert_unauthorized(embed(client, None))


def test_request_with_a_wrong_key_is_401(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsManager
) -> None:
    client = make_client(service, demo_dir, secrets)
    assert_unauthorized(embed(client, KEY + "x"))
    assert_unauthorized(embed(client, KEY[:-1]))
    assert_unauthorized(client.post("/v1/embeddings", json=BODY, headers={"Authorization": KEY}))


def test_request_with_the_right_key_gets_embeddings(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsManager
) -> None:
    client = make_client(service, demo_dir, secrets)
    response = embed(client, KEY)
    assert response.status_code == 200, response.text
    assert_openai_response(response.json())
    assert len(response.json()["data"]) == 2


def test_models_list_needs_the_key_and_health_does_not(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsManager
) -> None:
    client = make_client(service, demo_dir, secrets)
    assert_unauthorized(client.get("/v1/models"))
    assert client.get("/v1/models", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    assert client.get("/health").status_code == 200


def test_many_requests_read_the_secret_once(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsManager
) -> None:
    # GIVEN an app whose keys were loaded at init (the one read)
    client = make_client(service, demo_dir, secrets)
    assert secrets.reads == [secrets.arn]
    # WHEN many requests arrive, right, wrong and without a key
    statuses = [embed(client, key).status_code for key in [KEY, "sk-wrong-0123456789abc", None] * 8]
    # THEN every one was answered from the cached keys
    assert statuses == [200, 401, 401] * 8
    assert secrets.reads == [secrets.arn]


def test_old_and_new_keys_are_both_valid_while_the_secret_holds_both(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsManager
) -> None:
    # GIVEN keys read again once a cache period has passed
    clock = Clock()
    client = make_client(service, demo_dir, secrets, clock=clock)
    assert embed(client, NEW_KEY).status_code == 401
    # WHEN a rotation starts: the new key is added, the old one kept
    secrets.put(json.dumps({"keys": [NEW_KEY, KEY]}))
    clock.now += 300
    # THEN both keys work
    assert embed(client, NEW_KEY).status_code == 200
    assert embed(client, KEY).status_code == 200
    # WHEN the rotation ends: only the new key remains
    secrets.put(NEW_KEY)
    clock.now += 300
    # THEN the old key is refused
    assert embed(client, NEW_KEY).status_code == 200
    assert_unauthorized(embed(client, KEY))


def test_a_failed_refresh_keeps_the_keys_already_held(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsManager, caplog: Any
) -> None:
    clock = Clock()
    client = make_client(service, demo_dir, secrets, clock=clock)
    secrets.client.delete_secret(SecretId=secrets.arn, ForceDeleteWithoutRecovery=True)
    clock.now += 300
    with caplog.at_level(logging.WARNING, logger="siglip_text.http.auth"):
        assert embed(client, KEY).status_code == 200
        assert_unauthorized(embed(client, NEW_KEY))
    assert "could not refresh the API key secret" in caplog.text


def test_keys_never_appear_in_logs_even_at_debug_level(
    service: EmbeddingService,
    demo_dir: Path,
    secrets: SecretsManager,
    caplog: Any,
    capsys: Any,
) -> None:
    # GIVEN a rotation in progress (written before capture: the test's own write is logged),
    # and from then on every logger at DEBUG, botocore's included
    secrets.put(json.dumps({"keys": [NEW_KEY, KEY]}))
    capsys.readouterr()
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    client = make_client(service, demo_dir, secrets, clock=clock)
    # WHEN requests come with right, wrong and no keys, and the secret is refreshed each time
    for key in (KEY, NEW_KEY, "sk-wrong-0123456789abcdef", None):
        clock.now += 300
        embed(client, key)
    secrets.client.delete_secret(SecretId=secrets.arn, ForceDeleteWithoutRecovery=True)
    clock.now += 300
    embed(client, KEY)
    # THEN no key, nor its distinctive part, is in any log record or on stdout/stderr
    captured = capsys.readouterr()
    logged = caplog.text + captured.out + captured.err
    assert caplog.records, "nothing was logged: the check would be vacuous"
    for secret in (KEY, NEW_KEY, "0123456789abcdef", "fedcba9876543210"):
        assert secret not in logged


def test_init_fails_closed_when_the_secret_is_missing_unreadable_or_weak(
    demo_dir: Path, secrets: SecretsManager
) -> None:
    def build(**overrides: Any) -> None:
        settings = load_settings(model_dir=demo_dir, auth_mode="api-key", **overrides)
        build_authenticator(settings, provider=secrets.provider())

    with pytest.raises(ConfigError, match="SIGLIP_API_KEY_SECRET_ARN is not set"):
        build()
    with pytest.raises(ConfigError, match="ResourceNotFoundException"):
        build(api_key_secret_arn=secrets.arn + "-nope")
    secrets.put("short")
    with pytest.raises(ConfigError, match="at least 16 characters") as raised:
        build(api_key_secret_arn=secrets.arn)
    assert "short" not in str(raised.value)


# --- the Lambda entry point, as deployed with AuthMode=api-key -----------------------------


def expected_status_with_api_key(name: str) -> int:
    if "unknown-route" in name:
        return 404
    if "health" in name or "with-api-key" in name:
        return 200
    return 401  # every /v1 request without the right key, bad requests included


@pytest.fixture
def lambda_with_api_key(demo_dir: Path, secrets: SecretsManager) -> Iterator[LambdaFunction]:
    with built_lambda(
        demo_dir, SIGLIP_AUTH_MODE="api-key", SIGLIP_API_KEY_SECRET_ARN=secrets.arn
    ) as function:
        yield function


def test_every_event_file_through_the_handler_with_api_key_auth(
    lambda_with_api_key: LambdaFunction,
) -> None:
    names = sorted(p.name for p in EVENTS.glob("*.json"))
    assert any("with-api-key" in n for n in names) and any("wrong-api-key" in n for n in names)
    for name in names:
        result = lambda_with_api_key.handler(load_event(name), LambdaContext())
        body = json.loads(result["body"])
        assert result["statusCode"] == expected_status_with_api_key(name), (name, body)
        if result["statusCode"] == 401:
            assert_openai_error(body)
            assert body["error"]["code"] == "invalid_api_key"
