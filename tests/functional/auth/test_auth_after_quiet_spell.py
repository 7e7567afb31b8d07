"""Keys read ahead of expiry, and the first requests after a quiet spell: a 200 while Secrets
Manager answers, else a 503 with ``Retry-After`` in OpenAI's shape, never a 500.

The real app, demo model and boto3 client; Secrets Manager is moto's server on loopback behind
a relay that can hang. Most tests take the authenticator's clock (the quiet spell takes no
waiting; what they wait for is `serve`'s background read of the secret to end); the one of
`serve`'s own thread keeping the keys fresh runs on real time with sub-second periods.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.http.auth import REFRESH_LEAD_SECONDS, ApiKeyAuthenticator
from siglip_text.http.key_secret import default_provider
from siglip_text.settings import load_settings

from devkit.keyed_apps import Clock, keyed_app
from devkit.keys import KEY
from devkit.openai_shapes import assert_openai_error
from devkit.secrets_manager import SecretsServer

CACHE_SECONDS = 300
MAX_STALENESS_SECONDS = 900


def make(
    service: EmbeddingService,
    demo_dir: Path,
    secrets: SecretsServer,
    *,
    background: bool,
    periods: tuple[int, int] = (CACHE_SECONDS, MAX_STALENESS_SECONDS),
) -> tuple[TestClient, ApiKeyAuthenticator, Clock]:
    """The app as `serve` (background reads) or Lambda (reads on the request) builds it, with
    ``periods``: the key cache period and the staleness limit."""
    clock = Clock()
    client, authenticator = keyed_app(
        service,
        demo_dir,
        secrets.arn,
        clock,
        cache_seconds=periods[0],
        max_staleness_seconds=periods[1],
        background=background,
        provider=default_provider(connect_timeout=1, read_timeout=1),
    )
    return client, authenticator, clock


def request(client: TestClient, path: str) -> Any:
    headers = {"Authorization": f"Bearer {KEY}"}
    if path == "/v1/models":
        return client.get(path, headers=headers)
    return client.post(path, json={"input": ["a red block"]}, headers=headers)


def assert_unavailable(response: Any) -> int:
    """A 503 in OpenAI's shape with a Retry-After of at least 1 s; returns the Retry-After."""
    assert response.status_code == 503, (response.status_code, response.text)
    assert_openai_error(response.json())
    assert response.json()["error"]["code"] == "auth_unavailable"
    retry_after = int(response.headers["retry-after"])
    assert retry_after >= 1
    return retry_after


def until_read_ends(authenticator: ApiKeyAuthenticator, timeout: float = 10.0) -> None:
    """Until `serve`'s background read of the secret has ended, one way or the other."""
    deadline = time.monotonic() + timeout
    while authenticator._reading:
        assert time.monotonic() < deadline, "the background read did not end"
        time.sleep(0.01)


@pytest.mark.parametrize("background", [True, False], ids=["serve", "lambda"])
def test_with_cache_and_staleness_equal_the_read_starts_while_the_keys_are_still_valid(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsServer, background: bool
) -> None:
    # GIVEN the shortest key cache period and a staleness limit equal to it
    client, authenticator, clock = make(
        service, demo_dir, secrets, background=background, periods=(10, 10)
    )
    read_at = clock.now
    # WHEN a request comes once the keys are old enough that a read could not end in time
    clock.now += 10 - REFRESH_LEAD_SECONDS
    # THEN it is served with the keys held, and a read of the secret has started
    assert request(client, "/v1/embeddings").status_code == 200
    until_read_ends(authenticator)
    assert authenticator._read_at == clock.now > read_at
    # AND past the first keys' staleness limit the key is still accepted: never a 503
    clock.now = read_at + 10 + 1
    assert request(client, "/v1/embeddings").status_code == 200


@pytest.mark.slow  # a real refresher thread over a quiet spell of the cache period
def test_in_serve_a_quiet_spell_never_leaves_the_keys_stale(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsServer
) -> None:
    # GIVEN serve's authenticator with sub-second periods, its keys kept fresh by a thread
    settings = load_settings(
        model_dir=demo_dir, auth_mode="api-key", api_key_secret_arn=secrets.arn
    )
    authenticator = ApiKeyAuthenticator(
        secrets.arn,
        cache_seconds=0.6,
        max_staleness_seconds=0.6,
        refresh_lead_seconds=0.3,
        provider=default_provider(connect_timeout=1, read_timeout=1),
        background=True,
    )
    authenticator.load()
    authenticator.keep_fresh()
    client = TestClient(create_app(service, settings, authenticator=authenticator))
    try:
        # WHEN no request comes for three times the staleness limit
        time.sleep(1.8)
        # THEN the next keyed requests are served, none told to come back
        assert [request(client, "/v1/embeddings").status_code for _ in range(5)] == [200] * 5
    finally:
        authenticator.stop()


@pytest.mark.parametrize("path", ["/v1/embeddings", "/v1/models"])
def test_in_serve_keys_found_stale_all_the_same_get_503_then_200_once_the_read_succeeds(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsServer, path: str
) -> None:
    client, authenticator, clock = make(service, demo_dir, secrets, background=True)
    assert request(client, path).status_code == 200
    # GIVEN keys past their staleness limit with no read made meanwhile (the process was
    # stopped: no thread kept them fresh)
    clock.now += MAX_STALENESS_SECONDS + 1
    # WHEN the next request arrives: THEN it starts the read and is told to come back in 1 s
    # (waiting for the read would hold serve's event loop, every connection with it)
    assert assert_unavailable(request(client, path)) == 1
    # AND once the read has succeeded, the key is accepted again
    until_read_ends(authenticator)
    assert request(client, path).status_code == 200


@pytest.mark.slow  # a real refresher thread, then an outage past the staleness limit
def test_in_serve_a_quiet_spell_then_an_outage_gives_503_with_retry_after_never_500(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsServer
) -> None:
    client, authenticator, clock = make(service, demo_dir, secrets, background=True)
    # GIVEN a quiet spell longer than the maximum staleness, and Secrets Manager hung
    secrets.relay.down()
    clock.now += MAX_STALENESS_SECONDS + 1
    # WHEN requests arrive while the read runs and after it has failed
    while_reading = assert_unavailable(request(client, "/v1/embeddings"))
    until_read_ends(authenticator)
    after_failure = [assert_unavailable(request(client, "/v1/embeddings")) for _ in range(3)]
    # THEN each is a 503 telling when to come back: soon while a read runs, then when the
    # next attempt is due
    assert while_reading == 1
    assert after_failure[0] > 1
    # AND once Secrets Manager answers and that time has passed, the key is accepted again
    secrets.relay.restore()
    clock.now += after_failure[-1]
    assert_unavailable(request(client, "/v1/embeddings"))  # starts the read
    until_read_ends(authenticator)
    assert request(client, "/v1/embeddings").status_code == 200


def test_on_lambda_the_request_after_a_quiet_spell_reads_the_keys_and_gets_200(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsServer
) -> None:
    client, _, clock = make(service, demo_dir, secrets, background=False)
    clock.now += MAX_STALENESS_SECONDS + 1
    assert request(client, "/v1/embeddings").status_code == 200
