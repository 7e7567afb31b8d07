"""API keys while Secrets Manager is down: moto in server mode behind a relay that hangs
(accepts, never answers), the real boto3 client, the real app and demo model.

The authenticator's clock is the test's, so "the keys expired" takes no waiting; every
Secrets Manager call is real (its timeouts are wall-clock time).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.auth import ApiKeyAuthenticator
from siglip_text.http.errors import KeysUnavailableError
from siglip_text.http.key_secret import default_provider

from devkit.aws_lambda import LambdaContext, built_lambda, load_event
from devkit.keyed_apps import Clock, keyed_app
from devkit.keys import KEY, NEW_KEY
from devkit.openai_shapes import assert_openai_error
from devkit.secrets_manager import SecretsServer

BODY = {"input": ["a red block"]}
CACHE_SECONDS = 300
MAX_STALENESS_SECONDS = 900
#: The default client's bound on one read: connect (2 s) plus read (3 s) timeouts, one attempt.
ONE_REFRESH_SECONDS = 5.0


def make(
    service: EmbeddingService,
    demo_dir: Path,
    secrets: SecretsServer,
    clock: Clock,
    *,
    background: bool = False,
    fast_timeouts: bool = False,
    failures: list[int] | None = None,
) -> tuple[TestClient, ApiKeyAuthenticator]:
    return keyed_app(
        service,
        demo_dir,
        secrets.arn,
        clock,
        cache_seconds=CACHE_SECONDS,
        max_staleness_seconds=MAX_STALENESS_SECONDS,
        background=background,
        provider=default_provider(connect_timeout=1, read_timeout=1) if fast_timeouts else None,
        on_refresh_failed=(lambda: failures.append(1)) if failures is not None else None,
    )


def embed(client: TestClient, key: str) -> Any:
    return client.post("/v1/embeddings", json=BODY, headers={"Authorization": f"Bearer {key}"})


def hung(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsServer, age: float, **options: Any
) -> tuple[Clock, TestClient]:
    """`make`'s client (``options``: its own) with Secrets Manager hung and the keys read
    ``age`` seconds ago: the clock and the client."""
    clock = Clock()
    client, _ = make(service, demo_dir, secrets, clock, **options)
    secrets.relay.down()
    clock.now += age
    return clock, client


def assert_fails_closed(response: Any) -> None:
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) >= 1
    assert_openai_error(response.json())
    assert response.json()["error"]["code"] == "auth_unavailable"
    assert KEY not in response.text


@pytest.mark.slow  # one read of the hung endpoint: the client's 3 s read timeout
def test_ten_requests_during_an_outage_take_at_most_one_refresh_on_lambda(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsServer, caplog: Any
) -> None:
    # GIVEN the Lambda path (reads on the request path), its keys read at init and now
    # expired, and a Secrets Manager that accepts connections and never answers
    failures: list[int] = []
    _, client = hung(service, demo_dir, secrets, CACHE_SECONDS + 1, failures=failures)
    # WHEN ten requests with a valid key arrive
    started = time.monotonic()
    statuses = []
    with caplog.at_level(logging.WARNING, logger="siglip_text.http.auth"):
        for _ in range(10):
            statuses.append(embed(client, KEY).status_code)
            assert time.monotonic() - started < ONE_REFRESH_SECONDS + 1.5, statuses
    # THEN together they took one read's time, each was served with the held keys, and the
    # one failed read was logged and counted
    assert statuses == [200] * 10
    assert secrets.relay.hung == 1
    assert failures == [1]
    assert "could not refresh the API key secret" in caplog.text
    assert KEY not in caplog.text


def test_ten_concurrent_requests_during_an_outage_never_wait_for_a_read_in_serve(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsServer
) -> None:
    # GIVEN serve's authenticator (reads in a thread of its own), keys expired, Secrets
    # Manager hung
    _, client = hung(service, demo_dir, secrets, CACHE_SECONDS + 1, background=True)
    # WHEN ten requests arrive at once
    started = time.monotonic()
    with ThreadPoolExecutor(10) as pool:
        statuses = [r.status_code for r in pool.map(lambda _: embed(client, KEY), range(10))]
    elapsed = time.monotonic() - started
    # THEN all are served with the held keys, well inside one read's time, by one attempt
    assert statuses == [200] * 10
    assert elapsed < ONE_REFRESH_SECONDS
    time.sleep(0.2)  # the attempt's connection reaches the relay
    assert secrets.relay.hung == 1


@pytest.mark.slow  # reads against moto's server past the staleness limit
def test_past_the_maximum_staleness_requests_get_503_with_retry_after_never_200(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsServer
) -> None:
    # GIVEN keys older than the maximum staleness while Secrets Manager hangs
    clock, client = hung(service, demo_dir, secrets, MAX_STALENESS_SECONDS + 1, fast_timeouts=True)
    # WHEN requests arrive: the first makes the one attempt, the others wait for the backoff
    started = time.monotonic()
    responses = [embed(client, KEY) for _ in range(10)]
    # THEN each fails closed (503 + Retry-After), together within one read's time
    for response in responses:
        assert_fails_closed(response)
    assert time.monotonic() - started < 2 + 1.5
    assert secrets.relay.hung == 1
    # WHEN Secrets Manager is back and the Retry-After has passed
    secrets.relay.restore()
    clock.now += int(responses[-1].headers["retry-after"])
    # THEN the key is served again
    assert embed(client, KEY).status_code == 200


@pytest.mark.slow  # reads against moto's server, before and during an outage
def test_a_revoked_key_is_refused_within_the_stated_staleness(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsServer
) -> None:
    clock = Clock()
    client, _ = make(service, demo_dir, secrets, clock, fast_timeouts=True)
    # Secrets Manager up: a revoked key is refused once the cache period has passed
    secrets.put(NEW_KEY)
    assert embed(client, KEY).status_code == 200  # still within the cache period
    clock.now += CACHE_SECONDS
    assert embed(client, KEY).status_code == 401
    assert embed(client, NEW_KEY).status_code == 200
    # Secrets Manager down: the revocation cannot be seen, so the key it revokes is refused
    # (503) as soon as the held keys are older than the maximum staleness
    secrets.relay.down()
    secrets.put(KEY)  # NEW_KEY revoked, behind the outage
    clock.now += CACHE_SECONDS
    assert embed(client, NEW_KEY).status_code == 200  # held keys, within the staleness
    clock.now += MAX_STALENESS_SECONDS - CACHE_SECONDS + 1
    assert_fails_closed(embed(client, NEW_KEY))


@pytest.mark.slow  # reads against moto's server, dropped and read again
def test_forget_drops_every_key_and_reload_reads_them_again_failing_closed(
    service: EmbeddingService, demo_dir: Path, secrets: SecretsServer
) -> None:
    clock = Clock()
    client, authenticator = make(service, demo_dir, secrets, clock, fast_timeouts=True)
    assert authenticator.provider.store  # Powertools' cache holds the secret
    # WHEN every secret is dropped (e.g. before a snapshot)
    authenticator.forget()
    # THEN nothing of it is held: not the keys, nor their digests, nor the provider's cache
    assert not authenticator.provider.store
    assert authenticator._digests == () and getattr(authenticator, "_raw", None) is None
    # and, Secrets Manager down, a reload and the requests fail closed
    secrets.relay.down()
    with pytest.raises(KeysUnavailableError):
        authenticator.reload()
    assert_fails_closed(embed(client, KEY))
    # WHEN Secrets Manager is back, a reload reads the keys again
    secrets.relay.restore()
    assert authenticator.reload() == 1
    assert embed(client, KEY).status_code == 200


@pytest.mark.slow  # one read of the hung endpoint: the default client's 3 s read timeout
def test_the_lambda_handler_counts_a_failed_read_as_an_emf_metric(
    demo_dir: Path, secrets: SecretsServer, capsys: Any
) -> None:
    # GIVEN the entry point deployed with api-key auth, its keys expired, Secrets Manager hung
    with built_lambda(
        demo_dir, SIGLIP_AUTH_MODE="api-key", SIGLIP_API_KEY_SECRET_ARN=secrets.arn
    ) as entry:
        clock = Clock()
        authenticator = entry.parts.authenticator
        authenticator.clock = clock
        authenticator.forget()
        authenticator.reload()
        secrets.relay.down()
        clock.now += CACHE_SECONDS + 1
        capsys.readouterr()
        # WHEN a request with the key arrives
        result = entry.handler(load_event("rest-embeddings-with-api-key.json"), LambdaContext())
        output = capsys.readouterr().out
    # THEN it is served with the held keys, and the failed read is in the invocation's EMF
    assert result["statusCode"] == 200, result
    assert "ApiKeyRefreshFailures" in output
    assert KEY not in output
