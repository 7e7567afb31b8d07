"""The one assembly (assembly.py): the auth-mode rule, stated once for both platforms, and
the app each platform gets."""

from __future__ import annotations

import pytest
from siglip_text.assembly import (
    Platform,
    build_app,
    is_loopback,
    require_auth_mode,
    serve_allowed_hosts,
)
from siglip_text.engine.config import Settings, load_settings
from siglip_text.engine.errors import ConfigError
from siglip_text.engine.service import EmbeddingService

LOOPBACK = ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"]
BEYOND = ["0.0.0.0", "::", "192.168.1.10", "10.0.0.1", "my-host.example"]


@pytest.fixture(autouse=True)
def no_auth_mode_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIGLIP_AUTH_MODE", raising=False)


@pytest.mark.parametrize("host", LOOPBACK)
def test_on_loopback_serve_starts_without_an_auth_mode(host: str) -> None:
    assert is_loopback(host)
    require_auth_mode(load_settings(), Platform.SERVE, host=host)


@pytest.mark.parametrize("host", BEYOND)
def test_beyond_loopback_serve_needs_an_auth_mode_stated(
    host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not is_loopback(host)
    with pytest.raises(ConfigError) as refused:
        require_auth_mode(load_settings(), Platform.SERVE, host=host)
    assert "--auth-mode none" in refused.value.message
    # `none` stated on purpose is fine, by option or by variable
    require_auth_mode(load_settings(auth_mode="none"), Platform.SERVE, host=host)
    monkeypatch.setenv("SIGLIP_AUTH_MODE", "none")
    require_auth_mode(load_settings(), Platform.SERVE, host=host)


@pytest.mark.parametrize("host", LOOPBACK + BEYOND)
def test_the_lambda_function_needs_an_auth_mode_stated_wherever_it_runs(host: str) -> None:
    with pytest.raises(ConfigError, match="SIGLIP_AUTH_MODE is not set"):
        require_auth_mode(load_settings(), Platform.LAMBDA, host=host)
    require_auth_mode(load_settings(auth_mode="none"), Platform.LAMBDA, host=host)


def test_serve_on_loopback_answers_loopback_names_and_the_allowed_ones_only() -> None:
    allowed = serve_allowed_hosts("127.0.0.1", ["Proxy.Local"])
    assert allowed is not None and {"localhost", "127.0.0.1", "proxy.local"} <= allowed
    assert serve_allowed_hosts("0.0.0.0", ["proxy.local"]) is None


@pytest.mark.parametrize("platform", list(Platform))
def test_each_platform_gets_the_one_app_with_its_own_front_checks(
    service: EmbeddingService, settings: Settings, platform: Platform
) -> None:
    # WHEN the app is built for a platform (serve bound to loopback, its default)
    app = build_app(service, settings, platform)
    # THEN it serves the service; only serve's front takes JSON only and checks Host names
    assert app.state.service is service
    front = app.state.front
    assert front.policy.json_only is (platform is Platform.SERVE)
    assert (front.policy.allowed_hosts is not None) is (platform is Platform.SERVE)
