"""`siglip-text load-test` (alias `bench`) against a live `siglip-text serve --demo`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from siglip_text.cli import main
from siglip_text.tools.load_generator import payload, percentile


@pytest.mark.slow
def test_bench_counts_every_request_and_writes_json(
    live_server: str, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "bench.json"
    status = main(
        [
            "load-test",
            "--url",
            live_server,
            "--requests",
            "40",
            "--concurrency",
            "3",
            "--warmup",
            "2",
            "--batch",
            "2",
            "--json",
            str(out),
        ]
    )
    assert status == 0
    summary = json.loads(out.read_text())
    assert summary["requests"] == 40 and summary["successful"] == 40
    assert summary["statuses"] == {"200": 40} and summary["throttled_429"] == 0
    lat = summary["latency_ms"]
    assert 0 < lat["min"] <= lat["median"] <= lat["p99"] <= lat["max"]
    assert "throughput" in capsys.readouterr().out


def test_bench_reports_client_errors_apart_from_successes(live_server: str, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    status = main(
        [
            "bench",
            "--url",
            live_server,
            "--requests",
            "5",
            "--concurrency",
            "1",
            "--warmup",
            "0",
            "--model",
            "not-the-served-model",
            "--json",
            str(out),
        ]
    )
    summary = json.loads(out.read_text())
    assert status == 1
    assert summary["statuses"] == {"404": 5} and summary["successful"] == 0


def test_token_payloads_are_distinct_and_valid_json() -> None:
    bodies = {payload(i, kind="tokens", batch=3, model=None, encoding="base64") for i in range(50)}
    assert len(bodies) == 50
    parsed = json.loads(next(iter(bodies)))
    assert len(parsed["input"]) == 3 and all(isinstance(t, int) for t in parsed["input"][0])


@pytest.mark.parametrize(("p", "expected"), [(0, 1.0), (50, 2.5), (100, 4.0), (99, 3.97)])
def test_percentile_interpolates_between_ranks(p: float, expected: float) -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], p) == pytest.approx(expected)
