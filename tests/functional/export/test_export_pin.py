"""`siglip-text export` pins the manifest it writes: ``<out>.sha256`` beside the bundle, the
manifest's sha256 in ``sha256sum`` format, which the image build checks the bundle against
(scripts/check_bundle_files.py). A failed export leaves no pin, as it leaves no manifest.
On a real (tiny, random) SiglipModel; nothing is mocked.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

for _module in ("torch", "transformers", "onnx"):
    pytest.importorskip(
        _module,
        reason="needs the export extra: pip install torch==2.13.0 -e '.[export]'",
    )

from devkit.tiny_checkpoint import export_tiny, make_tiny_checkpoint  # noqa: E402
from scripts.check_bundle_files import problems, read_pin  # noqa: E402

pytestmark = [pytest.mark.export, pytest.mark.slow]


def test_export_pins_the_manifest_beside_the_bundle_and_the_build_check_passes_it(
    tmp_path: Path,
) -> None:
    checkpoint = make_tiny_checkpoint(tmp_path / "checkpoint")
    out = tmp_path / "layers" / "model"
    assert export_tiny(checkpoint, out) == 0
    pin = tmp_path / "layers" / "model.sha256"
    digest = hashlib.sha256((out / "manifest.json").read_bytes()).hexdigest()
    assert pin.read_text() == f"{digest}  manifest.json\n"
    assert problems(out, read_pin(pin.read_text())) == []
    # WHEN the same directory is exported again and the export fails: THEN no pin is left
    assert export_tiny(checkpoint, out, "--force", "--min-cosine", "1.5") == 1
    assert not pin.exists() and not (out / "manifest.json").exists()
