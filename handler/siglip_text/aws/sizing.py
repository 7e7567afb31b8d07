"""Lambda sizing: the function's memory against the bundle's need, and its CPU share.

Lambda's own environment facts live here, and only here; the engine is handed their
outcome (a thread count) as a plain value. docs/architecture.md has the init's stages.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

from ..engine.bundle import Manifest, MemoryNeed
from ..engine.cpu import usable_cpus
from ..engine.errors import ModelLoadError

#: Set by Lambda: the function's memory in MB.
MEMORY_SIZE_VARIABLE = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"

#: Set by Lambda Managed Instances: the Python runtime's worker processes per execution
#: environment (its `PerExecutionEnvironmentMaxConcurrency`), each a process doing its own
#: init and sharing the environment's CPUs with the others.
MAX_CONCURRENCY_VARIABLE = "AWS_LAMBDA_MAX_CONCURRENCY"

#: Lambda gives one full vCPU per 1,769 MB of memory
#: (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html).
LAMBDA_MB_PER_VCPU = 1769

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
    minimum, so that init fails closed before the model is loaded.

    Under Lambda Managed Instances the memory is the execution environment's, shared by
    ``processes`` (`processes_per_environment`) that each load the model (AWS Lambda
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


def processes_per_environment(environ: Mapping[str, str] | None = None) -> int | None:
    """The processes sharing this environment under Lambda Managed Instances, else None."""
    env = os.environ if environ is None else environ
    raw = env.get(MAX_CONCURRENCY_VARIABLE, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def lambda_cpus(
    environ: Mapping[str, str] | None = None,
    *,
    affinity: int | None = None,
    cgroup_root: Path | None = None,
) -> int:
    """The CPUs this process may use on Lambda: `usable_cpus`, bounded by Lambda's share.

    On Lambda (default) an environment runs one request and its CPU share follows the memory
    size (one vCPU per 1,769 MB). Under Lambda Managed Instances
    ``AWS_LAMBDA_MAX_CONCURRENCY`` processes share the environment's CPUs, whatever its
    memory: each gets its share of them, at least 1. ``affinity`` and ``cgroup_root`` stand
    for this process's (tests).
    """
    env = os.environ if environ is None else environ
    count = usable_cpus(affinity=affinity, cgroup_root=cgroup_root)
    processes = processes_per_environment(env)
    if processes is not None:
        return max(1, count // processes)
    memory_mb = env.get(MEMORY_SIZE_VARIABLE)
    if memory_mb and memory_mb.isdigit():
        count = min(count, max(1, round(int(memory_mb) / LAMBDA_MB_PER_VCPU)))
    return max(1, count)
