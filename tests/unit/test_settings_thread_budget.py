"""ONNX Runtime's thread count under Lambda Managed Instances (aws/sizing.py lambda_cpus).

There the Python runtime runs ``AWS_LAMBDA_MAX_CONCURRENCY`` processes per execution
environment, each with its own model and session, on the environment's CPUs: each process
takes its share of the CPUs it may use (affinity, cgroup quota), never a count derived from
the memory size.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from siglip_text.aws.sizing import lambda_cpus, processes_per_environment


def _cgroup(tmp_path: Path, cpus: float) -> Path:
    """A cgroup v2 directory whose ``cpu.max`` allows ``cpus`` CPUs."""
    (tmp_path / "cpu.max").write_text(f"{int(cpus * 100_000)} 100000\n")
    return tmp_path


@pytest.mark.parametrize(("processes", "threads"), [("4", 1), ("2", 1), ("1", 2)])
def test_two_cpus_are_shared_by_the_processes_of_an_environment(
    tmp_path: Path, processes: str, threads: int
) -> None:
    environ = {"AWS_LAMBDA_MAX_CONCURRENCY": processes}

    assert lambda_cpus(environ, affinity=2, cgroup_root=_cgroup(tmp_path, 2)) == threads


def test_the_memory_size_never_sets_the_threads_under_managed_instances(tmp_path: Path) -> None:
    # On Lambda (default) 10,240 MB buys 6 vCPUs, and 1,769 MB one; under Managed Instances
    # the environment's memory per vCPU is the user's choice (2 to 8 GiB) and says nothing.
    cgroup = _cgroup(tmp_path, 4)
    for memory in ("2048", "10240", "32768"):
        environ = {"AWS_LAMBDA_MAX_CONCURRENCY": "2", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": memory}
        assert lambda_cpus(environ, affinity=16, cgroup_root=cgroup) == 2


@pytest.mark.parametrize("processes", ["1", "2", "3", "5", "16", "64"])
@pytest.mark.parametrize(("affinity", "quota"), [(2, 2.0), (16, 2.0), (2, 8.0), (8, 1.5)])
def test_a_process_never_gets_more_threads_than_the_cpus_nor_fewer_than_one(
    tmp_path: Path, processes: str, affinity: int, quota: float
) -> None:
    environ = {"AWS_LAMBDA_MAX_CONCURRENCY": processes, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "32768"}
    usable = min(affinity, -(-int(quota * 10) // 10))

    threads = lambda_cpus(environ, affinity=affinity, cgroup_root=_cgroup(tmp_path, quota))

    assert 1 <= threads <= usable
    assert threads * int(processes) <= max(usable, int(processes))


def test_the_affinity_bounds_the_budget_when_the_cgroup_sets_no_quota(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("max 100000\n")

    threads = lambda_cpus({"AWS_LAMBDA_MAX_CONCURRENCY": "2"}, affinity=6, cgroup_root=tmp_path)

    assert threads == 3


def test_without_the_variable_lambda_default_keeps_the_memory_share(tmp_path: Path) -> None:
    cgroup = _cgroup(tmp_path, 8)

    assert (
        lambda_cpus({"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "3538"}, affinity=8, cgroup_root=cgroup)
        == 2
    )
    assert lambda_cpus({}, affinity=8, cgroup_root=cgroup) == 8


@pytest.mark.parametrize(
    ("value", "processes"), [("8", 8), ("1", 1), ("", None), ("0", None), ("x", None)]
)
def test_the_processes_per_environment_come_from_aws_lambda_max_concurrency(
    value: str, processes: int | None
) -> None:
    assert processes_per_environment({"AWS_LAMBDA_MAX_CONCURRENCY": value}) == processes
    assert processes_per_environment({}) is None
