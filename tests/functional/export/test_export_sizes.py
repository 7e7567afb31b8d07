"""Sizes: giant-opt's head wider than its tower, the export's memory pre-flight, and the
Lambda sizing guard (the manifest's memory need against the function's memory).

The checkpoints are real (tiny, random) SiglipModels written with save_pretrained; the
bundles are exported with ``siglip-text export`` and served by ``load_service`` and the
FastAPI app: nothing is mocked. Memory figures themselves are measured by
``benchmarks/export_memory.py``, never asserted here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from siglip_text.aws import sizing
from siglip_text.engine.errors import ModelLoadError
from siglip_text.http.app import create_app
from siglip_text.settings import load_service, load_settings
from siglip_text.tools.exit_status import ToolError
from siglip_text.tools.export import memory
from siglip_text.tools.export.checkpoint import (
    SourceSpec,
    load_checkpoint,
    pooled_vectors,
)
from siglip_text.tools.export.tower_graph import (
    CHILD_PROCESS_BYTES,
    build_graph,
    build_graph_in_child,
)

from devkit.aws_lambda import built_lambda
from devkit.tiny_checkpoint import (
    REPOSITORY,
    REVISION,
    export_tiny,
    make_tiny_checkpoint,
)

pytestmark = pytest.mark.export

HIDDEN, HEAD = 32, 48  # giant-opt's shape in miniature: a head wider than the tower


@pytest.fixture(scope="module")
def wide_head_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_checkpoint(
        tmp_path_factory.mktemp("wide-head"), hidden=HIDDEN, projection=HEAD
    )


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_a_head_wider_than_the_tower_sets_the_served_dimension(
    precision: str, wide_head_checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "bundle"

    # a 32-wide random tower quantizes coarsely (cosine about 0.95): the dimension is the
    # point here, int8 fidelity at real sizes is in the int8 tests and the benchmarks
    floor = "0.99999" if precision == "fp32" else "0.9"

    # WHEN a tower whose head is wider than its hidden size is exported and served
    assert (
        export_tiny(wide_head_checkpoint, out, "--precision", precision, "--int8-min-cosine", floor)
        == 0
    )
    manifest = json.loads((out / "manifest.json").read_text())
    settings = load_settings(model_dir=out, ort_intra_op_threads=1)
    with TestClient(create_app(load_service(settings), settings)) as client:
        response = client.post(
            "/v1/embeddings", json={"model": REPOSITORY, "input": ["a photo of a cat"]}
        )

    # THEN the dimension follows the head, and the vector is PyTorch's direction
    assert manifest["embedding_dimension"] == HEAD
    assert response.status_code == 200, response.text
    served = np.asarray(response.json()["data"][0]["embedding"])
    assert served.shape == (HEAD,)
    loaded = load_checkpoint(SourceSpec(str(wide_head_checkpoint), "local", REVISION))
    ids = load_service(settings).tokenizer.encode_texts(["a photo of a cat"]).ids
    expected = pooled_vectors(loaded.tower, ids.tolist())[0]
    cosine = float(served @ expected / np.linalg.norm(expected))
    assert cosine > float(floor)


def text_config(hidden: int, intermediate: int, layers: int, heads: int, **extra: Any) -> Any:
    """A SigLIP 2 text tower's config: every one has the 256k vocabulary and 64 positions."""
    from transformers import SiglipTextConfig

    return SiglipTextConfig(
        vocab_size=256_000,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        max_position_embeddings=64,
        **extra,
    )


@pytest.mark.slow  # imports torch and transformers: seconds
def test_the_parameter_count_from_the_config_is_transformers_own() -> None:
    import torch
    from transformers import SiglipTextModel

    # so400m's text tower and giant-opt's (the same tower, a 1536-wide head), built on the
    # meta device: shapes only, no memory
    for projection in (1152, 1536):
        config = text_config(1152, 4304, 27, 16, projection_size=projection)
        with torch.device("meta"):
            model = SiglipTextModel(config)

        assert memory.text_tower_parameters(config) == sum(p.numel() for p in model.parameters())


def test_check_memory_refuses_with_the_figure_when_memory_and_swap_fall_short() -> None:
    need = 9_000_000_000

    with pytest.raises(ToolError) as refused:
        memory.check_memory(need, memory.MachineMemory(4_000_000_000, 2_000_000_000))

    message = str(refused.value)
    assert "needs about 9.0 GB" in message and "4.0 GB available" in message
    assert "--skip-memory-check" in message
    # memory alone short, swap makes up the difference: a warning, not a refusal
    warning = memory.check_memory(need, memory.MachineMemory(6_000_000_000, 8_000_000_000))
    assert warning is not None and "swap" in warning
    assert memory.check_memory(need, memory.MachineMemory(16_000_000_000, 0)) is None


def test_machine_memory_reads_available_memory_and_free_swap(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(
        "MemTotal:       24683520 kB\nMemFree:         1000000 kB\n"
        "MemAvailable:    8000000 kB\nSwapTotal:      16777212 kB\nSwapFree:        2000000 kB\n"
    )

    machine = memory.machine_memory(meminfo)

    assert machine.available == 8_000_000 * 1024
    assert machine.swap_free == 2_000_000 * 1024


@pytest.mark.slow  # exports a tiny checkpoint: seconds
def test_export_refuses_before_loading_when_the_machine_is_clearly_too_small(
    wide_head_checkpoint: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a machine that reports 100 MB available and no swap
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemAvailable:     102400 kB\nSwapFree:              0 kB\n")
    monkeypatch.setattr(memory, "MEMINFO", meminfo)
    out = tmp_path / "bundle"

    # WHEN exported, THEN it refuses with the figure (exit 2) and writes nothing
    assert export_tiny(wide_head_checkpoint, out) == 2
    err = capsys.readouterr().err
    assert "export needs about" in err and "0.1 GB available" in err
    assert not out.exists() or not any(out.iterdir())

    # AND the flag overrides the refusal
    assert export_tiny(wide_head_checkpoint, out, "--skip-memory-check") == 0


@pytest.mark.slow
def test_a_graph_traced_in_a_child_process_is_the_same_files(
    wide_head_checkpoint: Path, tmp_path: Path
) -> None:
    # GIVEN the same checkpoint traced here and in a child process that loads it itself
    # (what export does for towers over tower_graph.CHILD_PROCESS_BYTES)
    spec = SourceSpec(str(wide_head_checkpoint), "local", REVISION)
    here, there = tmp_path / "here" / "text_model.onnx", tmp_path / "child" / "text_model.onnx"
    options = {"max_length": 64, "opset": 17, "external_data": True}
    built_here = build_graph(load_checkpoint(spec).release_tower(), here, **options)

    # WHEN built in the child
    built_there = build_graph_in_child(spec, there, **options)

    # THEN the files and the record are the same, byte for byte
    assert built_there == built_here
    assert sorted(p.name for p in there.parent.iterdir()) == [
        "text_model.onnx",
        "text_model.onnx.data",
    ]
    for name in ("text_model.onnx", "text_model.onnx.data"):
        assert (there.parent / name).read_bytes() == (here.parent / name).read_bytes()


@pytest.mark.slow  # imports torch and transformers: seconds
def test_the_smallest_siglip2_tower_is_traced_in_a_child_and_the_tests_towers_here(
    wide_head_checkpoint: Path,
) -> None:
    # base, the smallest SigLIP 2 text tower (768 wide, 12 layers, 256k vocabulary)
    base = text_config(768, 3072, 12, 12)
    tiny = load_checkpoint(SourceSpec(str(wide_head_checkpoint), "local", REVISION)).tower
    tiny_bytes = sum(p.numel() * p.element_size() for p in tiny.parameters())

    assert tiny_bytes < CHILD_PROCESS_BYTES < 4 * memory.text_tower_parameters(base)


# -- Lambda sizing: the manifest's memory need against AWS_LAMBDA_FUNCTION_MEMORY_SIZE ----


@pytest.fixture(scope="module")
def sized_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny fp32 bundle whose token table is over 1 MiB (hidden 96), so that its minimum
    and recommended memory differ."""
    checkpoint = make_tiny_checkpoint(tmp_path_factory.mktemp("sized"), hidden=96)
    out = tmp_path_factory.mktemp("sized-bundle") / "bundle"
    assert export_tiny(checkpoint, out) == 0
    return out


@pytest.mark.slow  # exports a tiny checkpoint: seconds
def test_export_records_the_memory_the_bundle_needs_resident(sized_bundle: Path) -> None:
    manifest = json.loads((sized_bundle / "manifest.json").read_text())
    model_bytes = sum(
        entry["size"] for name, entry in manifest["files"].items() if name != "tokenizer.json"
    )

    need = manifest["memory"]

    # the whole model files (rounded up to MiB) plus the runtime's allowance is recommended;
    # the minimum leaves out the token table
    assert need["recommended_mb"] == -(-model_bytes // 2**20) + sizing.RUNTIME_MB
    assert sizing.RUNTIME_MB < need["minimum_mb"] < need["recommended_mb"]
    assert "derived" in need["basis"]


@pytest.mark.slow  # exports a tiny checkpoint: seconds
def test_lambda_init_fails_closed_when_the_function_memory_cannot_hold_the_bundle(
    sized_bundle: Path,
) -> None:
    minimum = json.loads((sized_bundle / "manifest.json").read_text())["memory"]["minimum_mb"]

    with (
        pytest.raises(ModelLoadError) as failed,
        built_lambda(sized_bundle, AWS_LAMBDA_FUNCTION_MEMORY_SIZE=str(minimum - 1)),
    ):
        pass

    assert f"has {minimum - 1} MB of memory" in failed.value.message
    assert f"needs at least {minimum} MB" in failed.value.message


@pytest.mark.slow  # exports a tiny checkpoint: seconds
@pytest.mark.parametrize(
    ("memory", "warned"),
    [("minimum_mb", True), ("recommended_mb", False)],
    ids=["minimum", "recommended"],
)
def test_lambda_init_warns_below_the_recommended_memory_and_serves(
    sized_bundle: Path, caplog: pytest.LogCaptureFixture, memory: str, warned: bool
) -> None:
    need = json.loads((sized_bundle / "manifest.json").read_text())["memory"]

    with built_lambda(sized_bundle, AWS_LAMBDA_FUNCTION_MEMORY_SIZE=str(need[memory])):
        pass

    # THEN it serves; at the minimum it warns once, naming the recommended size
    assert "model loaded" in caplog.text
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    if warned:
        assert len(warnings) == 1 and f"below the {need['recommended_mb']} MB" in warnings[0]
    else:
        assert warnings == [], caplog.text
