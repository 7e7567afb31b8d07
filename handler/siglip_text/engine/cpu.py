"""The CPU that computes the vectors: its features, and whether its int8 kernel is exact.

ONNX Runtime picks its integer GEMM kernel by the CPU's instruction set. On AVX2 (and
AVX-512 without VNNI) the uint8 x int8 kernel multiplies with ``vpmaddubsw``, which
saturates each sum of two products at 32,767: an int8 bundle whose weights reach past
-64..64 then gets wrong vectors with no error (docs/cpus.md). `int8_kernel_product` runs
a known-answer ``MatMulInteger`` (kernels/matmul_integer_check.onnx, made by
scripts/make_kernel_check.py) to find out; `cpu_description` names the CPU in init errors;
`usable_cpus` counts the CPUs this process may use (affinity, cgroup quota).
"""

from __future__ import annotations

import math
import os
from functools import cache
from pathlib import Path

import numpy as np

KERNEL_CHECK = Path(__file__).parent / "kernels" / "matmul_integer_check.onnx"
#: 255 x 127 over K=64, as scripts/make_kernel_check.py builds it.
KERNEL_CHECK_EXACT = 255 * 127 * 64

#: The /proc/cpuinfo features that decide which integer kernel ONNX Runtime runs.
X86_FEATURES = ("avx", "avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8")
ARM_FEATURES = ("asimd", "asimddp", "i8mm", "sve", "sve2")


def cpu_features(cpuinfo: str | None = None) -> list[str]:
    """The features of `X86_FEATURES` / `ARM_FEATURES` this CPU lists (x86 ``flags`` or
    arm64 ``Features`` line of /proc/cpuinfo), in that order; [] when unreadable."""
    text = _read_cpuinfo() if cpuinfo is None else cpuinfo
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("flags", "features"):
            present = set(value.split())
            wanted = X86_FEATURES if key == "flags" else ARM_FEATURES
            return [name for name in wanted if name in present]
    return []


def cpu_description(cpuinfo: str | None = None) -> str:
    """E.g. ``x86_64 CPU 'AMD EPYC' with avx, avx2``, for error messages."""
    import platform

    text = _read_cpuinfo() if cpuinfo is None else cpuinfo
    model = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "CPU part") and value.strip():
            model = (
                f" '{value.strip()}'" if key.strip() == "model name" else f" part {value.strip()}"
            )
            break
    features = cpu_features(text)
    listed = ", ".join(features) if features else "none of " + ", ".join(X86_FEATURES)
    return f"{platform.machine()} CPU{model} with {listed}"


@cache
def int8_kernel_product() -> int:
    """This CPU's uint8 x int8 ``MatMulInteger`` of 255 x 127 over K=64: `KERNEL_CHECK_EXACT`
    (2,072,640) from an exact kernel, 1,048,544 from one that saturates pairs of products.
    Under a millisecond once ONNX Runtime is loaded; run once per process."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(KERNEL_CHECK), options, providers=["CPUExecutionProvider"])
    (product,) = session.run(None, {"a": np.full((1, 64), 255, dtype=np.uint8)})
    return int(np.asarray(product).ravel()[0])


def _read_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


def usable_cpus(*, affinity: int | None = None, cgroup_root: Path | None = None) -> int:
    """CPUs this process may actually use: its affinity, bounded by the cgroup's quota.

    ``os.cpu_count()`` reports the host's cores, which in containers is more than the share
    paid for; oversubscribed ORT threads then fight for it. A platform that bounds the share
    further (aws/sizing.py) bounds this count. ``affinity`` and
    ``cgroup_root`` stand for this process's (tests).
    """
    count = _affinity_cpus() if affinity is None else affinity
    quota = _cgroup_cpu_quota() if cgroup_root is None else _cgroup_cpu_quota(cgroup_root)
    if quota is not None:
        count = min(count, quota)
    return max(1, count)


def _affinity_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Whole CPUs allowed by the cgroup (v2 ``cpu.max`` or v1 CFS quota), rounded up."""
    try:
        text = (root / "cpu.max").read_text().split()
        if len(text) == 2 and text[0] != "max":
            return max(1, math.ceil(int(text[0]) / int(text[1])))
        if text:
            return None
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        if quota > 0 and period > 0:
            return max(1, math.ceil(quota / period))
    except (OSError, ValueError):
        pass
    return None
