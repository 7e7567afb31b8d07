"""A bundle of a base tower's width made from the demo: the demo graph, then a fixed linear
map from its 32 dimensions to ``dimension``. A real ONNX graph that ORT runs in
milliseconds, for the tests whose subject is the size of an answer, not its meaning."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper


def widen_demo_bundle(demo: Path, target: Path, *, dimension: int = 768) -> Path:
    """A copy of the demo bundle whose vectors have ``dimension`` values."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(demo / "tokenizer.json", target / "tokenizer.json")
    model = onnx.load(str(demo / "text_model.onnx"))
    graph = model.graph
    (output,) = graph.output
    narrow = output.type.tensor_type.shape.dim[1].dim_value
    for node in graph.node:
        node.output[:] = [name + "_narrow" if name == output.name else name for name in node.output]
    weights = np.random.default_rng(768).standard_normal((narrow, dimension)).astype(np.float32)
    graph.initializer.append(numpy_helper.from_array(weights, "widen_weights"))
    graph.node.append(
        helper.make_node("MatMul", [output.name + "_narrow", "widen_weights"], [output.name])
    )
    output.type.tensor_type.shape.dim[1].dim_value = dimension
    onnx.save(model, str(target / "text_model.onnx"))
    manifest = json.loads((demo / "manifest.json").read_text())
    for field in ("files", "self_check"):
        manifest.pop(field, None)
    manifest["embedding_dimension"] = dimension
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return target
