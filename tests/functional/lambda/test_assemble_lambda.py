"""assembly.assemble_lambda: an error before Powertools' logger exists (the settings, the
plan, the memory check) is held, then logged by that logger and raised."""

from __future__ import annotations

from pathlib import Path

import pytest
from siglip_text.assembly import assemble_lambda
from siglip_text.engine.errors import ConfigError
from siglip_text.settings import Settings, load_settings

from devkit.aws_lambda import plain_package_loggers

ENVIRON = {"POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_SERVICE_NAME": "siglip-text"}


def test_invalid_settings_are_logged_by_the_function_then_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # GIVEN settings that cannot be read, read by the function (as get_settings is)
    def invalid() -> Settings:
        return load_settings(ort_intra_op_threads=0, auth_mode="none")

    # WHEN the Lambda function is assembled
    with plain_package_loggers(), pytest.raises(ConfigError, match="SIGLIP_ORT_INTRA_OP_THREADS"):
        assemble_lambda(invalid, ENVIRON)

    # THEN the function's logger said why the init failed, with the error
    (failed,) = [r for r in caplog.records if r.getMessage().startswith("init failed")]
    assert failed.exc_info is not None and isinstance(failed.exc_info[1], ConfigError)


def test_the_function_is_mounted_on_the_parts_it_was_assembled_from(demo_dir: Path) -> None:
    # WHEN the Lambda function is assembled from valid settings
    settings = load_settings(model_dir=demo_dir, ort_intra_op_threads=1, auth_mode="none")
    with plain_package_loggers():
        function = assemble_lambda(settings, ENVIRON)
    # THEN it holds its parts: these settings, the service its app serves, no key check
    parts = function.parts
    assert parts is not None and parts.settings is settings
    assert parts.app.state.served.service is parts.service
    assert parts.authenticator is None and function.snapstart is None
