#!/usr/bin/env python3
"""Write handler/siglip_text/engine/kernels/matmul_integer_check.onnx (needs onnx: export extra).

The known-answer graph init runs on an int8 bundle whose weights are not declared
saturation-free (cpu.py): one ``MatMulInteger``, uint8 activations [1, 64] times a constant
int8 weight column [64, 1] of 127. Fed 255s, an exact kernel returns 255 x 127 x 64 =
2,072,640; ONNX Runtime's AVX2 U8S8 kernel (``vpmaddubsw``) saturates each pair of products
at 32,767 and returns 1,048,544. A few hundred bytes; regenerate with

    python scripts/make_kernel_check.py

It also writes the tests' graphs of the other weight forms (devkit/cpus.py):
int8 weights of 64 (the 7-bit form's largest, exact on every kernel: 1,044,480) and
uint8 weights of 255 (the U8U8 kernels: 4,161,600), beside int8 127 itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "handler" / "siglip_text" / "kernels" / "matmul_integer_check.onnx"
FIXTURES = ROOT / "tests" / "fixtures"
DEPTH = 64
WEIGHT = 127
TEST_CASES = [("int8", 127), ("int8", 64), ("uint8", 255)]


def build(element: str = "int8", weight: int = WEIGHT) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    activations = helper.make_tensor_value_info("a", TensorProto.UINT8, [1, DEPTH])
    product = helper.make_tensor_value_info("y", TensorProto.INT32, [1, 1])
    weights = numpy_helper.from_array(np.full((DEPTH, 1), weight, dtype=np.dtype(element)), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "w"], ["y"], name="known_answer")],
        "matmul_integer_check",
        [activations],
        [product],
        [weights],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="siglip-text"
    )
    model.ir_version = 8
    return bytes(model.SerializeToString())


def main() -> int:
    targets = {TARGET: build()}
    for element, weight in TEST_CASES:
        targets[FIXTURES / f"matmul_integer_{element}_{weight}.onnx"] = build(element, weight)
    for path, data in targets.items():
        path.write_bytes(data)
        print(f"{path.relative_to(ROOT)}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
