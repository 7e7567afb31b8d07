"""lambda_function.py, Lambda's entry point: imported as Lambda's init imports it (in a
process of its own, the environment Lambda sets), it builds everything, serves an event, and
leaves the cyclic collector on with what the init made frozen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devkit.paths import EVENTS, ROOT
from devkit.processes import python

SCRIPT = """
import gc, json, sys
import siglip_text.lambda_function as entry
from devkit.lambda_context import LambdaContext
event = json.load(open(sys.argv[1]))
result = entry.handler(event, LambdaContext())
print(json.dumps({
    "status": result["statusCode"],
    "gc_enabled": gc.isenabled(),
    "frozen": gc.get_freeze_count(),
    "parts": [name for name in ("app", "logger", "snapstart", "tracer") if hasattr(entry, name)],
}))
"""


@pytest.mark.slow  # a process that imports the whole runtime: seconds
def test_the_entry_point_builds_at_import_and_serves_an_event(demo_dir: Path) -> None:
    env = {
        "SIGLIP_MODEL_DIR": str(demo_dir),
        "SIGLIP_AUTH_MODE": "none",
        "SIGLIP_ORT_INTRA_OP_THREADS": "1",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
    }
    done = python("-c", SCRIPT, str(EVENTS / "rest-embeddings-text.json"), env=env, timeout=120)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["status"] == 200
    assert seen["parts"] == ["app", "logger", "snapstart", "tracer"]
    # THEN the collector runs again, and what the init made is never scanned again
    assert seen["gc_enabled"] is True and seen["frozen"] > 0
