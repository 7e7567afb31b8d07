"""The shipped demo bundle: an export like any other, small, and its vectors carry meaning."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
from siglip_text.engine.bundle import sha256_file
from siglip_text.engine.service import EmbeddingService

from devkit.paths import ROOT


@pytest.fixture(scope="module")
def make_demo() -> ModuleType:
    """scripts/make_demo_bundle.py as a module (its imports of torch are inside functions)."""
    spec = importlib.util.spec_from_file_location(
        "make_demo_bundle", ROOT / "scripts" / "make_demo_bundle.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_demo_manifest_is_written_by_siglip_text_export(demo_dir: Path) -> None:
    manifest = json.loads((demo_dir / "manifest.json").read_text())
    # the export pipeline's own record: its check against PyTorch and every file's hash
    assert manifest["export_check"]["tokenizer_mismatches"] == 0
    assert manifest["export_check"]["vs_pytorch"]["cosine_min"] >= 0.99999
    assert set(manifest["files"]) == {"text_model.onnx", "tokenizer.json"}
    for name, entry in manifest["files"].items():
        assert sha256_file(demo_dir / name) == entry["sha256"], name
    assert manifest["architecture"] == "Siglip2TextModel"


def test_demo_model_id_says_it_is_a_synthetic_demo(service: EmbeddingService) -> None:
    assert service.model_id == "siglip-text/synthetic-demo-tiny"


def test_demo_bundle_stays_well_under_one_megabyte(demo_dir: Path) -> None:
    assert sum(p.stat().st_size for p in demo_dir.iterdir()) < 512 * 1024


def test_held_out_paraphrases_are_close_and_unrelated_captions_far(
    make_demo: ModuleType, service: EmbeddingService
) -> None:
    # GIVEN scenes the demo never saw in training, each phrased twice, and pairs of scenes
    # that share no object, colour or place
    # WHEN they are embedded by the bundle (as serve does)
    figures = make_demo.measure_meaning(service)
    # THEN paraphrases are close and unrelated captions far
    assert figures["paraphrase_pairs"] >= 100 and figures["unrelated_pairs"] >= 100
    assert figures["paraphrase_mean_cosine"] > 0.8, figures
    assert figures["unrelated_mean_cosine"] < 0.3, figures


def test_held_out_scenes_were_never_trained_on(make_demo: ModuleType) -> None:
    train, held_out = make_demo.split_scenes()
    assert held_out and not set(train) & set(held_out)
