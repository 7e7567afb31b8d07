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
from dataclasses import dataclass

from .bundle import Manifest, MemoryNeed
from .errors import ModelLoadError

MEMORY_SIZE_VARIABLE = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"

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


#: config.MAX_CONCURRENCY_VARIABLE, named in the messages.
PROCESSES_VARIABLE = "AWS_LAMBDA_MAX_CONCURRENCY"


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
            f"({PROCESSES_VARIABLE}; {need.minimum_mb} MB minimum, "
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


# --- Lambda Managed Instances: how many processes per execution environment ---------------

#: Lambda Managed Instances' memory per vCPU of an execution environment
#: (`ExecutionEnvironmentMemoryGiBPerVCpu`, CloudFormation: 2 to 8).
MEMORY_GIB_PER_VCPU_RANGE = (2.0, 8.0)
#: The smallest Lambda Managed Instances function (AWS Lambda Developer Guide, "Best
#: practices for Lambda Managed Instances": 2 GB and 1 vCPU).
MANAGED_INSTANCES_MIN_MEMORY_MB = 2048


@dataclass(frozen=True)
class ManagedInstancesSizing:
    """What to set for one bundle on Lambda Managed Instances: `max_concurrency` is
    `PerExecutionEnvironmentMaxConcurrency` (the Python runtime's processes per
    environment), `threads` each process's ONNX Runtime threads (config.available_cpus)."""

    memory_mb: int
    memory_gib_per_vcpu: float
    vcpus: int
    fit_by_memory: int
    max_concurrency: int
    threads: int
    need_mb: int

    def advice(self) -> str:
        limit = "memory" if self.fit_by_memory < self.vcpus else "vCPUs"
        return (
            f"MemorySize={self.memory_mb} at {self.memory_gib_per_vcpu:g} GiB per vCPU is "
            f"{self.vcpus} vCPU(s); each process needs {self.need_mb} MB, so "
            f"{self.fit_by_memory} fit: set PerExecutionEnvironmentMaxConcurrency="
            f"{self.max_concurrency} (bounded by {limit}; each process gets {self.threads} "
            "ONNX Runtime thread(s))"
        )


def managed_instances_sizing(
    need: MemoryNeed, *, memory_mb: int, memory_gib_per_vcpu: float
) -> ManagedInstancesSizing:
    """`PerExecutionEnvironmentMaxConcurrency` for a bundle whose manifest states ``need``,
    in an environment of ``memory_mb`` (the function's MemorySize) at ``memory_gib_per_vcpu``.

    A query keeps its process's CPU busy from start to end: one process per vCPU gives the
    most queries per vCPU (more processes only queue on the same CPUs and multiply the
    memory), and as many as the memory holds with the whole model resident
    (``recommended_mb``), at least one holding the ``minimum_mb``. Raises ValueError when
    the environment cannot hold one process, or the figures are outside what Lambda takes.
    """
    low, high = MEMORY_GIB_PER_VCPU_RANGE
    if not low <= memory_gib_per_vcpu <= high:
        raise ValueError(
            f"ExecutionEnvironmentMemoryGiBPerVCpu must be {low:g} to {high:g}, "
            f"not {memory_gib_per_vcpu:g}"
        )
    if memory_mb < MANAGED_INSTANCES_MIN_MEMORY_MB:
        raise ValueError(
            f"Lambda Managed Instances functions have at least "
            f"{MANAGED_INSTANCES_MIN_MEMORY_MB} MB, not {memory_mb}"
        )
    vcpus = max(1, math.floor(memory_mb / (memory_gib_per_vcpu * 1024)))
    fit = memory_mb // need.recommended_mb
    need_mb = need.recommended_mb
    if fit < 1:
        if memory_mb < need.minimum_mb:
            raise ValueError(
                f"MemorySize={memory_mb} cannot hold one process of this bundle "
                f"(minimum {need.minimum_mb} MB, {need.recommended_mb} MB recommended)"
            )
        fit, need_mb = 1, need.minimum_mb
    processes = max(1, min(vcpus, fit))
    return ManagedInstancesSizing(
        memory_mb=memory_mb,
        memory_gib_per_vcpu=memory_gib_per_vcpu,
        vcpus=vcpus,
        fit_by_memory=fit,
        max_concurrency=processes,
        threads=max(1, vcpus // processes),
        need_mb=need_mb,
    )
