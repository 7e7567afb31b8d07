"""The image build's check of a bundle (scripts/check_bundle_files.py, standard library only):
every file the manifest records has its recorded size and sha256. The Docker build that runs
it is tests/functional/test_image_integrity.py."""

from __future__ import annotations

import shutil
from pathlib import Path

from siglip_text.engine.bundle import ONNX_FILE, TOKENIZER_FILE

from scripts.check_bundle_files import REQUIRED, problems
from tests.support.bundles import tampered
from tests.support.paths import ROOT

DEMO = ROOT / "handler" / "siglip_text" / "demo"


def test_the_check_names_every_kind_of_mismatch(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(DEMO, bundle)
    assert problems(bundle) == []
    tampered(bundle)
    (bundle / "tokenizer.json").write_bytes(b"{}")
    found = problems(bundle)
    assert any(p.startswith("text_model.onnx: sha256") for p in found), found
    assert any(p.startswith("tokenizer.json: 2 bytes") for p in found), found


def test_the_files_it_requires_are_the_packages_graph_and_tokenizer() -> None:
    assert REQUIRED == (ONNX_FILE, TOKENIZER_FILE)
