"""The one assembly (assembly.py): the auth-mode rule, stated once for both platforms, the
app each platform gets, and the parts `serve` is handed."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from siglip_text.assembly import (
    Platform,
    assemble,
    build_app,
    is_loopback,
    require_auth_mode,
    serve_allowed_hosts,
)
from siglip_text.engine.errors import ConfigError
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.front import Front
from siglip_text.settings import Settings, load_settings

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
    # THEN it serves the service, held in the app's one state object; only serve's front
    # takes JSON only and checks Host names
    assert app.state.served.service is service
    front = front_of(app)
    assert front.policy.json_only is (platform is Platform.SERVE)
    assert (front.policy.allowed_hosts is not None) is (platform is Platform.SERVE)


def test_serve_is_handed_its_parts_typed_and_the_app_holds_one_object(settings: Settings) -> None:
    # WHEN serve's parts are assembled (on loopback, no auth mode needed)
    parts = assemble(settings)
    # THEN the front it mounts is the one before the app's routes, with serve's checks
    assert parts.front is front_of(parts.app)
    assert parts.front.policy.json_only
    assert parts.app.state.served.service is parts.service
    assert parts.authenticator is None and parts.plan.manifest is parts.service.manifest
    # AND the app's state is that one object, nothing read back out of it
    assert set(vars(parts.app.state)["_state"]) == {"served"}


def front_of(app: FastAPI) -> Front:
    """The front door an app's middleware stack starts with (front.Front.around)."""
    (middleware,) = app.user_middleware
    front = middleware.cls.__self__  # type: ignore[attr-defined]  # a bound method of the front
    assert isinstance(front, Front)
    return front
