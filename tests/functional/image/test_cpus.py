"""The vectors on every CPU Lambda may run (docs/cpus.md): the int8 bundle export writes
computes the same vectors on AVX2 (``-cpu Haswell``), AVX (``-cpu SandyBridge``) and
Graviton2 (``-cpu neoverse-n1``) as on this machine; a bundle with full-range int8 weights
is refused at init where the kernel saturates; the init's self-check refuses a bundle whose
recorded reference this CPU does not reproduce.

The bundles are exported here from the tiny checkpoint (the full-range one is the demo tower
quantized the way export did before the 7-bit form); the emulated runs go through
devkit/cpus.py, each CPU once per module, and skip with the reason where qemu (or
the arm64 root) is absent.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from siglip_text.engine.cpu import KERNEL_CHECK_EXACT, int8_kernel_product
from siglip_text.engine.errors import ModelLoadError
from siglip_text.engine.service import EmbeddingService
from siglip_text.settings import demo_model_dir, load_service, load_settings
from siglip_text.tools.export.quantize import (
    PAIR_LIMIT,
    integer_weights,
    pair_bound,
    quantize_int8,
)

from devkit.cpus import TEXTS, run_on_cpu, shows_own_cpuinfo, why_not
from devkit.tiny_checkpoint import export_tiny, make_tiny_checkpoint

pytestmark = [pytest.mark.export, pytest.mark.emulation]

SATURATED = 1_048_544  # 255 x 127 over 64 through vpmaddubsw: 32,767 x 32 pairs
EXACT = {"int8": KERNEL_CHECK_EXACT, "int7": 255 * 64 * 64, "uint8": 255 * 255 * 64}


def _service(bundle: Path) -> EmbeddingService:
    return load_service(load_settings(model_dir=bundle, ort_intra_op_threads=1))


@pytest.fixture(scope="module")
def int8_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    checkpoint = make_tiny_checkpoint(tmp_path_factory.mktemp("checkpoint"))
    out = tmp_path_factory.mktemp("int8") / "bundle"
    assert export_tiny(checkpoint, out, "--precision", "int8") == 0
    return out


@pytest.fixture(scope="module")
def full_range_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo tower quantized as export did before the 7-bit form: int8 weights in
    -127..127, a manifest without ``saturation_free`` or a recorded reference."""
    demo = demo_model_dir()
    target = tmp_path_factory.mktemp("full-range")
    shutil.copy(demo / "tokenizer.json", target / "tokenizer.json")
    manifest = json.loads((demo / "manifest.json").read_text())
    for field in ("files", "self_check", "graph_optimization"):
        manifest.pop(field, None)
    quantize_int8(demo / "text_model.onnx", target / "text_model.onnx", weight_form="int8")
    manifest["precision"] = "int8"
    manifest["quantization"] = {"method": "onnxruntime quantize_dynamic (MatMul, int8 weights)"}
    (target / "manifest.json").write_text(json.dumps(manifest))
    return target


@pytest.fixture(scope="module")
def native(int8_bundle: Path) -> np.ndarray:
    return _service(int8_bundle).embed_texts(TEXTS).vectors


@pytest.mark.slow  # exports a tiny checkpoint: seconds
def test_exported_int8_graph_cannot_saturate_and_its_manifest_says_so(int8_bundle: Path) -> None:
    manifest = json.loads((int8_bundle / "manifest.json").read_text())
    weights = integer_weights(onnx.load(str(int8_bundle / "text_model.onnx")))

    assert len(weights) >= 6
    assert max(pair_bound(w) for w in weights) <= PAIR_LIMIT
    assert manifest["quantization"]["weight_form"] == "int7"
    assert manifest["quantization"]["saturation_free"] is True
    assert manifest["quantization"]["largest_pair_of_products"] <= PAIR_LIMIT


@pytest.mark.slow  # exports a tiny checkpoint: seconds
def test_manifest_records_the_probe_reference_and_this_cpu_meets_it(int8_bundle: Path) -> None:
    check = json.loads((int8_bundle / "manifest.json").read_text())["self_check"]
    vector = _service(int8_bundle).embed_texts([check["text"]]).vectors[0]

    assert len(check["reference"]) == vector.shape[0]
    assert check["min_cosine"] < check["measured_cosine"] <= 1.0
    cosine = float(vector @ np.asarray(check["reference"]))
    assert cosine == pytest.approx(check["measured_cosine"], abs=1e-5)
    assert check["measured_on"].startswith(("x86_64 CPU", "aarch64 CPU"))


@pytest.mark.slow  # exports a tiny checkpoint: seconds
def test_init_fails_closed_when_this_cpu_misses_the_recorded_reference(
    int8_bundle: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(int8_bundle, bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    reference = manifest["self_check"]["reference"]
    manifest["self_check"]["reference"] = reference[1:] + reference[:1]  # another vector
    (bundle / "manifest.json").write_text(json.dumps(manifest))

    with pytest.raises(ModelLoadError) as failure:
        _service(bundle)

    message = failure.value.message
    assert "self-check failed on this" in message and "cosine" in message
    assert f"bound {manifest['self_check']['min_cosine']}" in message


def test_full_range_int8_bundle_starts_only_where_the_int8_kernel_is_exact(
    full_range_bundle: Path,
) -> None:
    if int8_kernel_product() == KERNEL_CHECK_EXACT:
        assert _service(full_range_bundle).embed_texts(TEXTS).vectors.shape[0] == len(TEXTS)
    else:
        with pytest.raises(ModelLoadError, match="saturates each pair of products"):
            _service(full_range_bundle)


@pytest.fixture(scope="module")
def emulated(int8_bundle: Path, full_range_bundle: Path) -> Any:
    results: dict[str, dict[str, Any]] = {}

    def on(cpu: str) -> dict[str, Any]:
        reason = why_not(cpu)
        if reason:
            pytest.skip(reason)
        if cpu not in results:
            bundles = {"int8": int8_bundle, "full_range": full_range_bundle}
            results[cpu] = run_on_cpu(cpu, bundles)
        return results[cpu]

    return on


@pytest.mark.slow
@pytest.mark.parametrize("cpu", ["haswell", "sandybridge", "neoverse-n1"])
def test_int8_bundle_computes_this_machines_vectors_on(cpu: str, emulated, native) -> None:
    result = emulated(cpu)

    vectors = np.asarray(result["bundles"]["int8"]["vectors"])
    assert np.einsum("ij,ij->i", vectors, native).min() >= 0.99999
    assert result["kernels"]["int7"] == EXACT["int7"]
    assert result["kernels"]["uint8"] == EXACT["uint8"]


@pytest.mark.slow
def test_avx2_saturates_full_range_int8_and_init_refuses_such_a_bundle(emulated) -> None:
    result = emulated("haswell")

    assert result["kernels"]["int8"] == SATURATED
    error = result["bundles"]["full_range"]["error"]
    assert "saturates each pair of products" in error and "avx2" in error
    assert f"{SATURATED:,}" in error
    if shows_own_cpuinfo("haswell"):  # the message names the emulated CPU, not the host
        assert "avx2" in result["features"] and "avx512f" not in result["features"]
        assert "Haswell" in error and "avx512" not in error


@pytest.mark.slow
@pytest.mark.parametrize("cpu", ["sandybridge", "neoverse-n1"])
def test_exact_kernels_compute_full_range_int8_and_start_it_on(cpu: str, emulated) -> None:
    result = emulated(cpu)

    assert result["kernels"]["int8"] == EXACT["int8"]
    assert len(result["bundles"]["full_range"]["vectors"]) == len(TEXTS)
    if shows_own_cpuinfo(cpu):  # the child was shown the emulated CPU's cpuinfo
        assert not {"avx2", "avx512f"} & set(result["features"])
