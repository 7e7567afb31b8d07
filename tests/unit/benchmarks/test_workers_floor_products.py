"""benchmarks/workers.py: the floor's weight products, read from a bundle's graph when no
checkpoint is given (issue 48: an int8 export's graph has no plain MatMul weights, and the
paired floor divided by zero)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benchmarks.workers import paired_floor, tower_products, worker_floor

STANDARD = {"MatMul", "Gather", "Relu"}


def write_graph(
    directory: Path, nodes: list[tuple[str, list[str]]], weights: dict[str, np.ndarray]
) -> Path:
    """A text_model.onnx holding ``nodes`` (operator, inputs) and constant ``weights``; never
    run, only read (the com.microsoft operators are what ORT's optimizer writes)."""
    graph = helper.make_graph(
        [
            helper.make_node(
                op, inputs, [f"y{i}"], domain="com.microsoft" if op[0] in "DQA" else ""
            )
            for i, (op, inputs) in enumerate(nodes)
        ],
        "tower",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 16])],
        [helper.make_tensor_value_info(f"y{len(nodes) - 1}", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, name) for name, w in weights.items()],
    )
    directory.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph), directory / "text_model.onnx")
    return directory


def arguments(bundle: Path, floor_dir: Path | None = None) -> argparse.Namespace:
    return argparse.Namespace(
        bundle_dir=str(bundle),
        checkpoint=None,
        floor_dir=str(floor_dir) if floor_dir else None,
        threads=1,
        runs=1,
        allow_spinning="false",
    )


def test_an_int8_exports_quantized_operators_are_counted(tmp_path: Path) -> None:
    # GIVEN the operators `siglip-text export --precision int8` writes (and an fp32 export's
    # fused Attention), each with its constant weight, beside products of two activations
    int8 = np.zeros((16, 48), dtype=np.int8)
    weights = {
        "qkv_q": int8,
        "fc1_q": np.zeros((16, 64), dtype=np.int8),
        "fc2_q": np.zeros((64, 16), dtype=np.int8),
        "out_q": np.zeros((16, 16), dtype=np.int8),
        "head_q": np.zeros((16, 768), dtype=np.int8),
        "qkv": np.zeros((16, 48), dtype=np.float32),
        "table": np.zeros((100, 16), dtype=np.int8),
    }
    nodes = [
        ("QAttention", ["x", "qkv_q"]),
        ("DynamicQuantizeMatMul", ["x", "fc1_q"]),
        ("DynamicQuantizeMatMul", ["x", "out_q"]),
        ("MatMulIntegerToFloat", ["x", "fc2_q"]),
        ("DynamicQuantizeMatMul", ["x", "head_q"]),
        ("Attention", ["x", "qkv"]),
        ("MatMul", ["x", "y0"]),  # scores: no weight
        ("Gather", ["table", "x"]),  # the token table: a lookup, no product
    ]
    bundle = write_graph(tmp_path / "bundle", nodes, weights)
    # WHEN the floor's products are read from it (no --checkpoint)
    products = sorted(tower_products(arguments(bundle)))
    # THEN every weight product is there, at 64 rows, and nothing else
    assert products == [
        (64, 16, 16, 1),
        (64, 16, 48, 2),
        (64, 16, 64, 1),
        (64, 16, 768, 1),
        (64, 64, 16, 1),
    ]


def test_a_graph_without_weight_products_reports_the_floor_unavailable(tmp_path: Path) -> None:
    # GIVEN a graph with no operator the floor knows
    bundle = write_graph(tmp_path / "bundle", [("Relu", ["x"])], {})
    assert tower_products(arguments(bundle)) == []
    # THEN the floor worker stops with the reason (run.py prints it), instead of a zero floor
    with pytest.raises(SystemExit, match="no weight products found"):
        worker_floor(arguments(bundle, tmp_path / "floor"))
    # AND the paired floor of an empty product list is absent, not a division by zero
    floor_dir = tmp_path / "floor"
    floor_dir.mkdir(exist_ok=True)
    (floor_dir / "products.json").write_text(json.dumps([]))
    assert paired_floor(arguments(bundle, floor_dir), "int8", lambda: None) is None
