"""AWS Lambda entry point: ``siglip_text.lambda_function.handler``.

Everything is built at import time, i.e. in Lambda's init phase, by the one assembly
(assembly.lambda_function): settings, manifest, tokenizer, ONNX session, an inference
probe, the app, Mangum. Any failure raises, so the init phase fails closed and no request
is ever served by a broken artifact. What stays here is the process's own concern: the
cyclic collector, paused for the init.
"""

from __future__ import annotations

import gc
from typing import Any

# The init allocates hundreds of thousands of long-lived objects (pydantic's schemas for
# FastAPI's models, the modules); the cyclic collector would walk them again and again while
# they are made, and again on every later full collection. So it pauses for the init, and
# what the init made is frozen (gc.freeze: never scanned again) when it resumes.
gc.disable()
try:
    from .assembly import lambda_function
    from .engine.config import get_settings

    function = lambda_function(get_settings)
except BaseException:
    gc.enable()  # a process that goes on (a test's) collects what the failed init made
    raise

app = function.app
logger = function.logger
snapstart = function.snapstart
tracer = function.tracer


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """API Gateway (REST v1 or HTTP API v2) or function URL event -> the app (through
    `LambdaFunction.handler`: Powertools, Mangum); never raises."""
    return function.handler(event, context)


gc.freeze()
gc.enable()
