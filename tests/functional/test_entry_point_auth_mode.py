"""The Lambda entry point refuses to start unless SIGLIP_AUTH_MODE is set explicitly."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from siglip_text.engine.config import get_settings
from siglip_text.engine.errors import ConfigError

from tests.support.aws_lambda import MODULE, imported_lambda, plain_package_loggers


def test_the_entry_point_refuses_to_start_without_an_auth_mode(
    demo_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a valid bundle and every other setting, but no SIGLIP_AUTH_MODE
    monkeypatch.setenv("SIGLIP_MODEL_DIR", str(demo_dir))
    monkeypatch.setenv("SIGLIP_ORT_INTRA_OP_THREADS", "1")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.delenv("SIGLIP_AUTH_MODE", raising=False)
    get_settings.cache_clear()
    sys.modules.pop(MODULE, None)
    try:
        # WHEN the init phase runs; THEN it fails, naming the variable
        with plain_package_loggers(), pytest.raises(ConfigError, match="SIGLIP_AUTH_MODE"):
            importlib.import_module(MODULE)
    finally:
        sys.modules.pop(MODULE, None)
        get_settings.cache_clear()


def test_an_explicit_none_still_starts(demo_dir: Path) -> None:
    with imported_lambda(demo_dir, SIGLIP_AUTH_MODE="none") as entry:
        assert entry.app.state.service.dimension == 32
