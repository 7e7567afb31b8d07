"""`siglip-text export` reports progress through its long steps: a line on stderr before
and after each, with the elapsed time. On a real (tiny, random) checkpoint."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

for _module in ("torch", "transformers", "onnx"):
    pytest.importorskip(_module, reason="needs the export extra (torch, transformers, onnx)")

from siglip_text.cli import main  # noqa: E402

from devkit.tiny_checkpoint import REPOSITORY, REVISION, make_tiny_checkpoint  # noqa: E402

pytestmark = [pytest.mark.export, pytest.mark.slow]


def test_export_prints_each_step_before_and_after_with_its_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = make_tiny_checkpoint(tmp_path / "checkpoint")

    # WHEN exported as documented, with no --precision (export's default: int8)
    argv = ["export", str(checkpoint), "--out", str(tmp_path / "bundle")]
    argv += ["--repository", REPOSITORY, "--revision", REVISION, "--threads", "1"]
    assert main([*argv, "--fidelity-corpus", "64"]) == 0

    # THEN each step has a line before and one after it, with its time

    err = capsys.readouterr().err
    started = re.findall(r"\[export\] step (\d+)/(\d+) (\w+): started \(\d+ s in\)", err)
    done = re.findall(r"\[export\] step (\d+)/(\d+) (\w+): done in \d+\.\d s", err)
    assert started and [s[:3] for s in started] == [d[:3] for d in done]
    total = int(started[0][1])
    assert [int(s[0]) for s in started] == list(range(1, total + 1))
    assert ("5", str(total), "graph") in started  # the ONNX export, the long one
    assert "quantize" in {s[2] for s in started}  # int8: export's default
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["precision"] == "int8"
