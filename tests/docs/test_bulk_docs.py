"""docs/bulk.md: its command runs as written, and its cost table is the computation it says
(the measured time per input from docs/performance.md times the prices benchmarks/cost.py
holds)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest
from siglip_text.cli import main

from benchmarks.cost import FRONTEND_USD_PER_MILLION, GB_SECOND_USD, LAMBDA_REQUEST_USD_PER_MILLION
from devkit.paths import ROOT
from devkit.readme import section, snippet, table_rows

BULK = ROOT / "docs" / "bulk.md"
PERFORMANCE = ROOT / "docs" / "performance.md"


def test_the_documented_bulk_command_runs_against_a_live_server(
    live_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = shlex.split(snippet("bulk-embed-local").against(live_server))
    assert command[0] == "siglip-text"
    monkeypatch.chdir(tmp_path)
    Path("corpus.txt").write_text("a red block\na robot arm\n\nthe end\n")

    assert main([*command[1:], "--quiet"]) == 0

    assert np.load("vectors.npy").shape == (4, 32)


def one_vcpu_ms(bundle: str) -> int:
    """The 1-thread query time of ``bundle`` in performance.md's "Every size" table."""
    for row in table_rows(section(PERFORMANCE, "### Every size")):
        if row[0].strip() == bundle:
            cell = next(c for c in row if re.fullmatch(r"\s*\d+ / \d+\s*", c))
            return int(cell.split("/")[1])
    raise AssertionError(f"{bundle} is not in performance.md's Every size table")


@pytest.mark.parametrize(("bundle", "tower"), [("base-int8", "int8"), ("base-fp32", "fp32")])
def test_the_cost_of_a_million_texts_is_computed_from_the_measured_time(
    bundle: str, tower: str
) -> None:
    ms = one_vcpu_ms(bundle)
    gb_seconds = 1_000_000 * ms / 1000 * 1769 / 1024
    requests = 1_000_000 / 64
    fees = requests * LAMBDA_REQUEST_USD_PER_MILLION / 1e6
    rest = requests * FRONTEND_USD_PER_MILLION["rest-api"] / 1e6
    x86, arm = (gb_seconds * GB_SECOND_USD[arch] for arch in ("x86_64", "arm64"))

    row = next(
        r
        for r in table_rows(section(BULK, "## What a million texts cost on Lambda"))
        if r[0].strip() == tower
    )

    assert row[1].strip() == str(ms)
    assert row[3].strip() == f"{gb_seconds:,.0f}"
    assert row[4].strip() == f"${x86:.2f} / ${arm:.2f}"
    assert row[6].strip() == f"**${x86 + fees + rest:.2f}**"
    assert row[7].strip() == f"**${x86 + fees:.2f}**"
