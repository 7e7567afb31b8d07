"""`managed_instances_sizing` (tools/managed_instances.py): what
PerExecutionEnvironmentMaxConcurrency to set on Lambda Managed Instances from the manifest's
memory need, the memory per vCPU and the environment's memory."""

from __future__ import annotations

import pytest
from siglip_text.engine.bundle import MemoryNeed
from siglip_text.tools.managed_instances import managed_instances_sizing

#: The need export recorded for the base bundles (docs/sizes.md).
BASE_FP32 = MemoryNeed(minimum_mb=477, recommended_mb=1227, basis="base fp32")
BASE_INT8 = MemoryNeed(minimum_mb=233, recommended_mb=422, basis="base int8")


@pytest.mark.parametrize(
    ("need", "memory_mb", "gib_per_vcpu", "vcpus", "processes", "threads"),
    [
        # 8 GiB at 4 GiB/vCPU: 2 vCPUs; six int8 models fit, the vCPUs bound it
        (BASE_INT8, 8192, 4.0, 2, 2, 1),
        # the same environment at 2 GiB/vCPU: 4 vCPUs, four processes
        (BASE_INT8, 8192, 2.0, 4, 4, 1),
        # fp32 at 2 GiB/vCPU: 4 vCPUs but 8,192 MB holds six 1,227 MB models: 4
        (BASE_FP32, 8192, 2.0, 4, 4, 1),
        # 4,096 MB at 2 GiB/vCPU: 2 vCPUs, three fp32 models fit: 2
        (BASE_FP32, 4096, 2.0, 2, 2, 1),
        # 2,048 MB at 2 GiB/vCPU: 1 vCPU and one fp32 model
        (BASE_FP32, 2048, 2.0, 1, 1, 1),
        # 16 GiB at 2 GiB/vCPU: 8 vCPUs, but memory holds 13 fp32 models: 8
        (BASE_FP32, 16384, 2.0, 8, 8, 1),
        # so400m fp32's need (docs/sizes.md) in 4 GiB at 2 GiB/vCPU: memory bounds it to 1,
        # which then has both vCPUs' threads
        (MemoryNeed(minimum_mb=1726, recommended_mb=2851, basis="so400m"), 4096, 2.0, 2, 1, 2),
    ],
)
def test_max_concurrency_is_one_process_per_vcpu_as_far_as_memory_holds_the_models(
    need: MemoryNeed, memory_mb: int, gib_per_vcpu: float, vcpus: int, processes: int, threads: int
) -> None:
    sizing = managed_instances_sizing(need, memory_mb=memory_mb, memory_gib_per_vcpu=gib_per_vcpu)

    assert (sizing.vcpus, sizing.max_concurrency, sizing.threads) == (vcpus, processes, threads)
    assert sizing.max_concurrency * sizing.need_mb <= memory_mb
    assert f"PerExecutionEnvironmentMaxConcurrency={processes}" in sizing.advice()


def test_an_environment_below_the_recommended_memory_runs_one_process_at_the_minimum() -> None:
    need = MemoryNeed(minimum_mb=1726, recommended_mb=2851, basis="so400m fp32")

    sizing = managed_instances_sizing(need, memory_mb=2048, memory_gib_per_vcpu=2.0)

    assert (sizing.max_concurrency, sizing.need_mb) == (1, 1726)


@pytest.mark.parametrize(
    ("memory_mb", "gib_per_vcpu", "complaint"),
    [
        (8192, 1.0, "2 to 8"),
        (8192, 9.0, "2 to 8"),
        (1024, 2.0, "at least 2048 MB"),
    ],
)
def test_what_lambda_does_not_take_is_refused(
    memory_mb: int, gib_per_vcpu: float, complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        managed_instances_sizing(BASE_INT8, memory_mb=memory_mb, memory_gib_per_vcpu=gib_per_vcpu)


def test_a_bundle_too_large_for_the_environment_is_refused() -> None:
    huge = MemoryNeed(minimum_mb=3000, recommended_mb=4000, basis="huge")

    with pytest.raises(ValueError, match="cannot hold one process"):
        managed_instances_sizing(huge, memory_mb=2048, memory_gib_per_vcpu=2.0)
