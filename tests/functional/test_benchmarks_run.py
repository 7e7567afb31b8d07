"""The benchmark script runs end to end on the tiny demo model (CI checks only that)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.cost import cost_per_million, latency_at_memory
from tests.support.paths import ROOT


def test_benchmark_prints_every_table_and_writes_figures(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run.py"),
            "--runs",
            "3",
            "--batches",
            "1,2",
            "--threads",
            "2",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for heading in ("## Latency", "## Init", "## Matmul floor", "## Fidelity", "## Cost"):
        assert heading in done.stdout
    figures = json.loads(out.read_text())
    latency = figures["fp32"]["latency"]
    assert set(latency) == {"1", "2"}
    assert latency["1"]["handler"]["median_ms"] >= latency["1"]["raw"]["median_ms"] > 0
    assert figures["fidelity"]["fp32"] > 0.999999
    assert figures["fp32"]["init"]["peak_rss_mb"] > 0
    assert figures["fp32"]["one_thread_ms"] > 0  # the cost model's 1-vCPU latency


def test_cost_per_million_matches_a_hand_computation() -> None:
    # 2,048 MB for 40 ms (billed 40 ms): 2 GB x 0.04 s = 0.08 GB-s per request.
    cost = cost_per_million(39.2, memory_mb=2048, architecture="x86_64", api="rest")
    assert cost.billed_ms == 40
    assert abs(cost.lambda_compute_usd - 0.08 * 0.0000166667 * 1e6) < 1e-9
    assert abs(cost.total_usd - (0.08 * 16.6667 + 0.20 + 3.50)) < 1e-6
    arm = cost_per_million(39.2, memory_mb=2048, architecture="arm64", api="http")
    assert abs(arm.total_usd - (0.08 * 13.3334 + 0.20 + 1.00)) < 1e-6


def test_latency_below_one_vcpu_stretches_by_the_cpu_share() -> None:
    measured = {1: 50.0, 2: 30.0}
    assert abs(latency_at_memory(measured, 1769 // 2) - 100.0) < 0.2
    assert latency_at_memory(measured, 1769) == 50.0
    assert latency_at_memory(measured, 3538) == 30.0
    assert latency_at_memory(measured, 10240) == 30.0


def test_session_options_benchmark_runs_on_the_demo_bundle() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "session_options.py"),
            "--bundle",
            str(ROOT / "handler" / "siglip_text" / "demo"),
            "--runs",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "spinning on / off" in done.stdout
    assert "as exported" in done.stdout and "one file" in done.stdout
