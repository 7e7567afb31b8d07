"""benchmarks/managed_instances.py: what to set on Lambda Managed Instances for a bundle, and
the cost model against per-request Lambda (its break-even rate is where the two meet)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from siglip_text.engine.bundle import MemoryNeed

from benchmarks.managed_instances import PRICES, Bundle, costs, main
from devkit.bundles import demo_with_memory

#: base fp32's need and its latency at 1 and 2 threads (docs/performance.md, "Every size")
BASE_FP32 = Bundle(
    "base-fp32", MemoryNeed(minimum_mb=477, recommended_mb=1227, basis="b"), {1: 83.0, 2: 48.0}
)
MODEL = {"memory_mb": 8192, "gib_per_vcpu": 4.0, "vcpu_hour": 0.0408, "utilization": 0.7}


@pytest.fixture
def sized_demo(tmp_path: Path) -> Path:
    return demo_with_memory(tmp_path / "demo", minimum_mb=700, recommended_mb=1500)


def test_the_command_tells_what_concurrency_to_set_from_the_manifest(
    sized_demo: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 4,096 MB at 2 GiB per vCPU: 2 vCPUs, and two 1,500 MB processes fit
    status = main(
        [
            "--bundle", f"demo={sized_demo}", "--latency", "demo=20,12",
            "--memory-mb", "4096", "--gib-per-vcpu", "2", "--json", str(tmp_path / "rows.json"),
        ]
    )  # fmt: skip

    out = capsys.readouterr().out
    assert status == 0
    assert "set PerExecutionEnvironmentMaxConcurrency=2" in out
    assert "| demo | 1,500 | 1 | 2 | 3,000 of 4,096 | 50.0 / 41.7 | not measured |" in out
    assert len(json.loads((tmp_path / "rows.json").read_text())) == 2  # the default rates


def test_memory_bounds_the_advice_when_one_process_per_vcpu_does_not_fit(
    sized_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a bundle of 3,000 MB per process in 4,096 MB at 2 GiB per vCPU: 2 vCPUs, one process
    manifest = json.loads((sized_demo / "manifest.json").read_text())
    manifest["memory"] = {"minimum_mb": 2000, "recommended_mb": 3000, "basis": "test"}
    (sized_demo / "manifest.json").write_text(json.dumps(manifest))

    main(["--bundle", f"demo={sized_demo}", "--latency", "demo=20,12", "--memory-mb", "4096",
          "--gib-per-vcpu", "2"])  # fmt: skip

    out = capsys.readouterr().out
    assert "set PerExecutionEnvironmentMaxConcurrency=1 (bounded by memory" in out
    assert "gets 2 ONNX Runtime thread(s)" in out


def test_at_the_break_even_rate_managed_instances_cost_what_lambda_does() -> None:
    row = costs(BASE_FP32, 1.0, **MODEL)
    assert row.break_even is not None

    even = costs(BASE_FP32, row.break_even, **MODEL)

    assert even.lmi == pytest.approx(even.on_demand, rel=1e-3)
    assert costs(BASE_FP32, row.break_even * 0.9, **MODEL).lmi > even.on_demand
    assert costs(BASE_FP32, row.break_even * 1.1, **MODEL).lmi < even.on_demand


def test_managed_instances_cost_per_query_falls_with_the_rate_to_the_busy_vcpus_price() -> None:
    low, mid, high = (costs(BASE_FP32, rate, **MODEL).lmi for rate in (1.0, 10.0, 1000.0))
    request = PRICES["lambda_request"].usd * 1e6
    busy = 0.0408 * 1.15 / (1000 / 83 * 0.7 * 3600) * 1e6  # one 1-thread process per vCPU

    assert low > mid > high
    assert high == pytest.approx(busy + request, rel=1e-6)
    # per-request Lambda costs the same per query at any steady rate
    assert costs(BASE_FP32, 1.0, **MODEL).on_demand == costs(BASE_FP32, 1000.0, **MODEL).on_demand


def test_a_bundle_without_latencies_is_refused(sized_demo: Path) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["--bundle", f"demo={sized_demo}"])
    assert refused.value.code == 2
