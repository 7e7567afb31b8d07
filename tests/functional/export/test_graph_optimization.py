"""Offline graph optimization and external weights: what export writes, the server loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from siglip_text.engine.bundle import sha256_file
from siglip_text.engine.errors import ModelLoadError
from siglip_text.settings import load_service, load_settings
from siglip_text.tools.export.onnx_export import external_data_path, save_onnx
from siglip_text.tools.export.ort_optimize import optimize_graph

TEXTS = ["a photo of a cat", "A RED BLOCK", "猫の写真", "🐱 " * 40]


def record_files(bundle: Path, **extra: object) -> None:
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(extra)
    manifest["files"] = {
        p.name: {"sha256": sha256_file(p), "size": p.stat().st_size}
        for p in sorted(bundle.iterdir())
        if p.name != "manifest.json"
    }
    path.write_text(json.dumps(manifest))


def load(bundle: Path, **overrides: object):
    return load_service(load_settings(model_dir=bundle, ort_intra_op_threads=1, **overrides))


@pytest.fixture
def optimized_bundle(bundle_copy: Path) -> Path:
    graph = bundle_copy / "text_model.onnx"
    save_onnx(onnx.load(str(graph)), graph, external_data=True)
    optimize_graph(graph)
    record_files(bundle_copy, graph_optimization="extended")
    return bundle_copy


def test_optimized_external_data_bundle_gives_the_same_vectors(optimized_bundle, service) -> None:
    optimized = load(optimized_bundle)
    assert external_data_path(optimized_bundle / "text_model.onnx").stat().st_size > 100_000
    np.testing.assert_allclose(
        optimized.embed_texts(TEXTS).vectors, service.embed_texts(TEXTS).vectors, atol=1e-6
    )


def test_single_file_graph_stays_one_file_when_optimized(bundle_copy: Path, service) -> None:
    # GIVEN a one-file graph (export --single-file); WHEN it is optimized offline
    graph = bundle_copy / "text_model.onnx"
    optimize_graph(graph, external_data=False)
    record_files(bundle_copy, graph_optimization="extended")
    # THEN no weights file appears beside it, and it serves the same vectors
    assert sorted(p.name for p in bundle_copy.iterdir()) == [
        "manifest.json",
        "text_model.onnx",
        "tokenizer.json",
    ]
    np.testing.assert_allclose(
        load(bundle_copy).embed_texts(TEXTS).vectors, service.embed_texts(TEXTS).vectors, atol=1e-6
    )


def test_offline_optimized_graph_is_loaded_without_optimizing_again(optimized_bundle) -> None:
    session = load(optimized_bundle).encoder.session
    level = session.get_session_options().graph_optimization_level
    assert level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL


def test_plain_graph_is_optimized_at_load(service) -> None:
    level = service.encoder.session.get_session_options().graph_optimization_level
    assert level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL


def test_optimization_level_setting_overrides_the_manifest(optimized_bundle) -> None:
    session = load(optimized_bundle, ort_graph_optimization="basic").encoder.session
    level = session.get_session_options().graph_optimization_level
    assert level == ort.GraphOptimizationLevel.ORT_ENABLE_BASIC


def test_truncated_weights_file_fails_init_naming_it(optimized_bundle) -> None:
    data = external_data_path(optimized_bundle / "text_model.onnx")
    data.write_bytes(data.read_bytes()[:-4096])
    with pytest.raises(ModelLoadError, match=r"text_model\.onnx\.data: size .* \(truncated"):
        load(optimized_bundle)


def test_missing_weights_file_fails_init_naming_it(optimized_bundle) -> None:
    external_data_path(optimized_bundle / "text_model.onnx").unlink()
    with pytest.raises(ModelLoadError, match=r"text_model\.onnx\.data: file not found"):
        load(optimized_bundle)


def test_weights_file_is_readable_by_other_users(optimized_bundle) -> None:
    # the Lambda image runs as another user than the one who exported the bundle
    mode = external_data_path(optimized_bundle / "text_model.onnx").stat().st_mode & 0o777
    assert mode == 0o644
