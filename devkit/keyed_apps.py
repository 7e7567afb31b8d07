"""The app with api-key auth against a test Secrets Manager (moto), as `serve` (reads off the
request path) or Lambda (reads in the request) builds it, on a clock the test moves: "the
keys expired" takes no waiting."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from aws_lambda_powertools.utilities.parameters import SecretsProvider
from fastapi.testclient import TestClient
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.http.auth import ApiKeyAuthenticator, build_authenticator
from siglip_text.settings import load_settings


class Clock:
    """A clock that moves only when the test sets ``now``."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def keyed_app(
    service: EmbeddingService,
    demo_dir: Path,
    secret_arn: str,
    clock: Clock,
    *,
    cache_seconds: int,
    max_staleness_seconds: int = 900,
    background: bool = False,
    provider: SecretsProvider | None = None,
    on_refresh_failed: Callable[[], None] | None = None,
) -> tuple[TestClient, ApiKeyAuthenticator]:
    """The app and its authenticator; the reads are the requests' own (no thread keeps the
    keys fresh on the test's clock)."""
    settings = load_settings(
        model_dir=demo_dir,
        ort_intra_op_threads=1,
        auth_mode="api-key",
        api_key_secret_arn=secret_arn,
        api_key_cache_seconds=cache_seconds,
        api_key_max_staleness_seconds=max_staleness_seconds,
    )
    authenticator = build_authenticator(
        settings,
        provider=provider,
        background=background,
        keep_fresh=False,
        clock=clock,
        on_refresh_failed=on_refresh_failed,
    )
    assert isinstance(authenticator, ApiKeyAuthenticator)  # a secret's keys, not a key file's
    app = create_app(service, settings, authenticator=authenticator, offload_inference=background)
    return TestClient(app), authenticator
