"""The Lambda function refuses to start unless SIGLIP_AUTH_MODE is set explicitly."""

from __future__ import annotations

from pathlib import Path

import pytest
from siglip_text.assembly import assemble_lambda
from siglip_text.engine.errors import ConfigError
from siglip_text.settings import load_settings

from devkit.aws_lambda import built_lambda, plain_package_loggers


def test_the_function_refuses_to_start_without_an_auth_mode(
    demo_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a valid bundle and every other setting, but no SIGLIP_AUTH_MODE
    monkeypatch.delenv("SIGLIP_AUTH_MODE", raising=False)
    settings = load_settings(model_dir=demo_dir, ort_intra_op_threads=1)
    environ = {"POWERTOOLS_TRACE_DISABLED": "true"}
    # WHEN the init phase runs; THEN it fails, naming the variable
    with plain_package_loggers(), pytest.raises(ConfigError, match="SIGLIP_AUTH_MODE"):
        assemble_lambda(settings, environ)


def test_an_explicit_none_still_starts(demo_dir: Path) -> None:
    with built_lambda(demo_dir, SIGLIP_AUTH_MODE="none") as function:
        assert function.parts.service.dimension == 32
