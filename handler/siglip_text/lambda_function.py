"""AWS Lambda entry point: ``siglip_text.lambda_function.handler``.

The init runs at import time (Lambda's init phase), in one call of the assembly
(`assembly.assemble_lambda`); any failure raises, so the init fails closed. What stays here
is the process's own concern: the cyclic collector, paused for the init.
docs/architecture.md, "The assembly", walks it.
"""

from __future__ import annotations

import gc

# The init allocates hundreds of thousands of long-lived objects (pydantic's schemas for
# FastAPI's models, the modules); the cyclic collector would walk them again and again while
# they are made, and again on every later full collection. So it pauses for the init, and
# what the init made is frozen (gc.freeze: never scanned again) when it resumes.
gc.disable()
try:
    from .assembly import assemble_lambda
    from .aws.types import LambdaContext, LambdaEvent, ProxyResponse
    from .settings import get_settings

    function = assemble_lambda(get_settings)
except BaseException:
    gc.enable()  # a process that goes on (a test's) collects what the failed init made
    raise

assert function.parts is not None  # assemble_lambda returns the function mounted
parts = function.parts
app = parts.app
logger = function.logger
snapstart = function.snapstart
tracer = function.tracer


def handler(event: LambdaEvent, context: LambdaContext) -> ProxyResponse:
    """API Gateway (REST v1 or HTTP API v2) or function URL event -> the app (through
    `LambdaFunction.handler`: Powertools, Mangum); never raises."""
    return function.handler(event, context)


gc.freeze()
gc.enable()
