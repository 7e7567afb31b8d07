"""Lambda Managed Instances: how many processes per execution environment, for one bundle.

Offline (benchmarks/managed_instances.py and docs/managed-instances.md use it); the function
itself only checks its memory (aws/sizing.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..engine.bundle import MemoryNeed

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
    environment), `threads` each process's ONNX Runtime threads (aws/sizing.py lambda_cpus)."""

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
