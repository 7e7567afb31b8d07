"""int8 quantization of a real exported graph (the demo tower): structure, size, fidelity."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (in the test and export extras)")

from onnx import numpy_helper  # noqa: E402
from siglip_text.engine.service import EmbeddingService  # noqa: E402
from siglip_text.settings import load_service, load_settings  # noqa: E402
from siglip_text.tools.export.quantize import quantize_int8  # noqa: E402

TEXTS = ["a photo of a cat", "A Photo Of A CAT", "", "一只猫的照片", "a red block " * 20]


@pytest.fixture(scope="module")
def int8_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from siglip_text.settings import demo_model_dir

    demo = demo_model_dir()
    target = tmp_path_factory.mktemp("int8")
    shutil.copy(demo / "tokenizer.json", target / "tokenizer.json")
    manifest = json.loads((demo / "manifest.json").read_text())
    manifest.pop("files")  # the fp32 graph's sizes, not the int8 graph's
    (target / "manifest.json").write_text(json.dumps(manifest))
    quantize_int8(demo / "text_model.onnx", target / "text_model.onnx")
    return target


def _service(directory: Path) -> EmbeddingService:
    return load_service(load_settings(model_dir=directory, ort_intra_op_threads=1))


def test_token_table_becomes_int8_rows_with_one_scale_per_row(int8_dir: Path) -> None:
    from siglip_text.settings import demo_model_dir

    fp32 = {
        i.name: numpy_helper.to_array(i)
        for i in onnx.load(str(demo_model_dir() / "text_model.onnx")).graph.initializer
    }
    int8 = {
        i.name: numpy_helper.to_array(i)
        for i in onnx.load(str(int8_dir / "text_model.onnx")).graph.initializer
    }
    table_name = max((n for n, a in fp32.items() if a.ndim == 2), key=lambda n: fp32[n].size)
    table = fp32[table_name]

    quantized, scale = int8[f"{table_name}_int8"], int8[f"{table_name}_row_scale"]

    assert table_name not in int8
    assert quantized.dtype == np.int8 and quantized.shape == table.shape
    assert scale.shape == (table.shape[0],)
    error = np.abs(quantized.astype(np.float32) * scale[:, None] - table)
    assert (error <= scale[:, None] / 2 + 1e-7).all()


def test_int8_graph_runs_matmuls_as_integer_ops_and_is_smaller(int8_dir: Path) -> None:
    from siglip_text.settings import demo_model_dir

    ops = [n.op_type for n in onnx.load(str(int8_dir / "text_model.onnx")).graph.node]

    assert ops.count("MatMulInteger") >= 12
    assert (int8_dir / "text_model.onnx").stat().st_size < 0.6 * (
        demo_model_dir() / "text_model.onnx"
    ).stat().st_size


def test_int8_demo_bundle_loads_like_serve_and_stays_close_to_fp32(
    int8_dir: Path, service: EmbeddingService
) -> None:
    int8 = _service(int8_dir)

    cosine = np.einsum(
        "ij,ij->i", int8.embed_texts(TEXTS).vectors, service.embed_texts(TEXTS).vectors
    )

    assert cosine.min() >= 0.99
    assert json.loads((int8_dir / "manifest.json").read_text())["embedding_dimension"] == 32


@pytest.mark.parametrize("form", ["int7", "int8"])
def test_quantizing_a_graph_with_a_weights_file_gives_the_in_memory_graph(
    form: str, tmp_path: Path
) -> None:
    from siglip_text.settings import demo_model_dir
    from siglip_text.tools.export.onnx_export import save_onnx

    # GIVEN the demo graph as one file, and the same graph with its weights in a .data file
    # (as export writes every graph): the second is quantized with the token table left on
    # disk (a one-row stand-in for quantize_dynamic) and saved a tensor at a time
    source = tmp_path / "fp32" / "text_model.onnx"
    source.parent.mkdir()
    save_onnx(onnx.load(str(demo_model_dir() / "text_model.onnx")), source, external_data=True)
    in_memory, from_files = tmp_path / "a" / "text_model.onnx", tmp_path / "b" / "text_model.onnx"

    # WHEN both are quantized
    info_a = quantize_int8(demo_model_dir() / "text_model.onnx", in_memory, weight_form=form)  # type: ignore[arg-type]
    info_b = quantize_int8(source, from_files, external_data=True, weight_form=form)  # type: ignore[arg-type]

    # THEN they are the same graph with the same numbers, and nothing is left beside the source
    a, b = onnx.load(str(in_memory)), onnx.load(str(from_files))
    assert list(a.graph.node) == list(b.graph.node)
    assert [i.name for i in a.graph.initializer] == [i.name for i in b.graph.initializer]
    for x, y in zip(a.graph.initializer, b.graph.initializer, strict=True):
        assert np.array_equal(numpy_helper.to_array(x), numpy_helper.to_array(y)), x.name
    assert info_a == info_b
    assert sorted(p.name for p in source.parent.iterdir()) == [
        "text_model.onnx",
        "text_model.onnx.data",
    ]
    assert (from_files.parent / "text_model.onnx.data").is_file()
