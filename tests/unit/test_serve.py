"""`serve`'s start rule: bound beyond loopback, only with an auth mode stated on purpose."""

from __future__ import annotations

import resource

import pytest
from siglip_text.engine.config import load_settings
from siglip_text.engine.errors import ConfigError
from siglip_text.serve import (
    RESERVED_DESCRIPTORS,
    descriptors_for,
    is_loopback,
    require_auth_mode_beyond_loopback,
)

LOOPBACK = ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"]
BEYOND = ["0.0.0.0", "::", "192.168.1.10", "10.0.0.1", "my-host.example"]


@pytest.mark.parametrize("host", LOOPBACK)
def test_on_loopback_serve_starts_without_an_auth_mode(
    host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SIGLIP_AUTH_MODE", raising=False)
    assert is_loopback(host)
    require_auth_mode_beyond_loopback(host, load_settings())


@pytest.mark.parametrize("host", BEYOND)
def test_beyond_loopback_serve_needs_an_auth_mode_stated(
    host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SIGLIP_AUTH_MODE", raising=False)
    assert not is_loopback(host)
    with pytest.raises(ConfigError) as refused:
        require_auth_mode_beyond_loopback(host, load_settings())
    assert "--auth-mode none" in refused.value.message
    # `none` stated on purpose is fine, by option or by variable
    require_auth_mode_beyond_loopback(host, load_settings(auth_mode="none"))
    monkeypatch.setenv("SIGLIP_AUTH_MODE", "none")
    require_auth_mode_beyond_loopback(host, load_settings())


def test_the_connections_that_fit_the_open_file_limit_are_allowed() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert descriptors_for(8) == 8
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on open files here")
    # more connections than the hard limit allows: the soft limit rises to it, no further
    assert descriptors_for(hard) == hard - RESERVED_DESCRIPTORS
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
