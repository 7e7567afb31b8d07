"""X-Ray tracing is wired only when enabled, and never records responses."""

from __future__ import annotations

import os
import subprocess

import pytest

from devkit.paths import EVENTS
from devkit.processes import python

pytestmark = pytest.mark.slow  # the handler in fresh interpreters


SCRIPT = f"""
import json, sys
import siglip_text.lambda_function as lf
from devkit.aws_lambda import LambdaContext
event = json.load(open({str(EVENTS / "rest-embeddings-text.json")!r}))
result = lf.handler(event, LambdaContext())
print("STATUS", result["statusCode"], "TRACER", lf.tracer is not None,
      "XRAY", "aws_xray_sdk.core" in sys.modules)
"""


def run_handler(script: str = SCRIPT, **env_changes: str) -> subprocess.CompletedProcess[str]:
    """The script in a fresh interpreter, with the demo bundle and these POWERTOOLS_* values."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIGLIP_", "POWERTOOLS_"))}
    env.update(
        SIGLIP_MODEL_DIR=os.path.join("handler", "siglip_text", "demo"),
        SIGLIP_AUTH_MODE="none",
        SIGLIP_ORT_INTRA_OP_THREADS="1",
        **env_changes,
    )
    return python("-c", script, env=env, timeout=120)


def test_tracing_disabled_never_imports_the_xray_sdk() -> None:
    last = run_handler(POWERTOOLS_TRACE_DISABLED="true").stdout.splitlines()[-1]
    assert last == "STATUS 200 TRACER False XRAY False"


def test_tracing_enabled_wraps_the_handler_and_still_answers() -> None:
    last = run_handler(POWERTOOLS_TRACE_DISABLED="false").stdout.splitlines()[-1]
    assert last == "STATUS 200 TRACER True XRAY True"


def test_powertools_log_event_setting_cannot_log_query_text() -> None:
    # GIVEN an operator who sets POWERTOOLS_LOGGER_LOG_EVENT=true (Powertools would log the
    # whole API Gateway event, body included)
    script = SCRIPT.replace(
        "result = lf.handler(event, LambdaContext())",
        'event["body"] = json.dumps({"input": "quokka-private-marker"})\n'
        "result = lf.handler(event, LambdaContext())",
    )
    # WHEN a query goes through the handler
    done = run_handler(
        script,
        POWERTOOLS_TRACE_DISABLED="true",
        POWERTOOLS_LOGGER_LOG_EVENT="true",
        POWERTOOLS_LOG_LEVEL="DEBUG",
    )
    # THEN it is answered and its text is in no output
    assert "STATUS 200" in done.stdout
    assert "quokka-private-marker" not in done.stdout + done.stderr
