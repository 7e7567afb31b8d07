"""Lambda sizing: does the function's memory hold what the bundle needs resident?

Export records the need in the manifest (``memory``: `bundle.MemoryNeed`, derived from the
graph's sizes); Lambda states the function's memory in ``AWS_LAMBDA_FUNCTION_MEMORY_SIZE``
(MB). Below ``minimum_mb`` the weights every query reads cannot be held: init fails closed
with a `ModelLoadError` naming both figures, before the model is loaded. Below
``recommended_mb`` it serves, and the init logs a warning saying what to set.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from .bundle import Manifest, MemoryNeed
from .config import MAX_CONCURRENCY_VARIABLE, MEMORY_SIZE_VARIABLE
from .errors import ModelLoadError

#: The process around the weights: Python, ONNX Runtime, tokenizers, the web stack, the
#: tokenizer and a query's activations. An allowance, not a measurement: set so that the
#: minimum it gives matches the serving RSS measured through the Lambda entry point, which
#: docs/sizes.md records per size (python -m benchmarks.sizes).
RUNTIME_MB = 150


def memory_need(*, model_bytes: int, table_bytes: int, precision: str | None) -> MemoryNeed:
    """The need of a graph whose files hold ``model_bytes``, ``table_bytes`` of them the
    token embedding table."""
    mib = 1024 * 1024
    every_query = max(model_bytes - table_bytes, 0)
    return MemoryNeed(
        minimum_mb=math.ceil(every_query / mib) + RUNTIME_MB,
        recommended_mb=math.ceil(model_bytes / mib) + RUNTIME_MB,
        basis=f"derived at export ({precision or 'fp32'}): the model files' weights other "
        f"than the token table (read by every query) + {RUNTIME_MB} MiB for the runtime is "
        "the minimum; the whole model files + the runtime is recommended",
    )


def check_function_memory(
    manifest: Manifest, environ: Mapping[str, str] | None = None, *, processes: int = 1
) -> str | None:
    """None when the function's memory holds the bundle (or either figure is unknown); a
    warning to log when it is below the recommended figure; `ModelLoadError` below the
    minimum.

    Under Lambda Managed Instances the memory is the execution environment's, shared by
    ``processes`` (config.processes_per_environment) that each load the model (AWS Lambda
    Developer Guide, "Python runtime for Lambda Managed Instances"): the need is that many
    times the bundle's.
    """
    env = os.environ if environ is None else environ
    raw = env.get(MEMORY_SIZE_VARIABLE, "").strip()
    need = manifest.memory
    if need is None or not raw.isdigit():
        return None
    size = int(raw)
    minimum_mb = need.minimum_mb * processes
    recommended_mb = need.recommended_mb * processes
    bundle = f"this bundle ({manifest.precision or 'fp32'}, {manifest.embedding_dimension}-d)"
    if processes > 1:
        bundle += (
            f" in each of the {processes} processes of an environment "
            f"({MAX_CONCURRENCY_VARIABLE}; {need.minimum_mb} MB minimum, "
            f"{need.recommended_mb} MB recommended each)"
        )
        fix = "raise MemorySize or lower PerExecutionEnvironmentMaxConcurrency"
    else:
        fix = "raise MemorySize"
    if size < minimum_mb:
        raise ModelLoadError(
            f"the function has {size} MB of memory ({MEMORY_SIZE_VARIABLE}); {bundle} needs "
            f"at least {minimum_mb} MB to hold the weights every query reads, "
            f"{recommended_mb} MB recommended: {fix}"
        )
    if size < recommended_mb:
        return (
            f"the function has {size} MB of memory ({MEMORY_SIZE_VARIABLE}), below the "
            f"{recommended_mb} MB {bundle} needs to keep its whole model resident "
            f"(minimum {minimum_mb} MB): token-table pages will be read again from the "
            f"image; {fix}"
        )
    return None
