"""Small ONNX graphs built with onnx.helper, for init-failure and error-path tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from siglip_text.engine.encoder import OnnxEncoder, SessionConfig
from siglip_text.engine.service import EmbeddingService


def save_graph(
    path: Path,
    *,
    kind: str = "finite",
    dimension: int = 32,
    max_length: int = 64,
    input_name: str = "input_ids",
    input_type: int = TensorProto.INT64,
    output_name: str = "text_embeds",
    output_rank: int = 2,
    with_attention_mask: bool = False,
) -> Path:
    """A graph ``input_ids [batch, L] -> [batch, dimension]``.

    kind: ``finite`` = first `dimension` ids cast to float plus 1 (so never zero);
    ``nan`` = NaN everywhere; ``zero`` = zeros; ``sqrt-shifted`` = sqrt(id - 5) over the
    first `dimension` ids (NaN for ids below 5, finite otherwise); ``mask-sum`` = like
    finite, plus the attention mask's row sum (to prove the mask is fed all ones).
    """
    nodes = []
    inits = []
    inputs = [helper.make_tensor_value_info(input_name, input_type, ["batch", max_length])]
    if with_attention_mask:
        inputs.append(
            helper.make_tensor_value_info(
                "attention_mask", TensorProto.INT64, ["batch", max_length]
            )
        )
    inits += [
        numpy_helper.from_array(np.array([0], dtype=np.int64), "starts"),
        numpy_helper.from_array(np.array([dimension], dtype=np.int64), "ends"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axes"),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one"),
        numpy_helper.from_array(np.array(5.0, dtype=np.float32), "five"),
        numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero"),
        numpy_helper.from_array(np.array(np.nan, dtype=np.float32), "nan"),
    ]
    nodes.append(helper.make_node("Slice", [input_name, "starts", "ends", "axes"], ["sliced"]))
    nodes.append(helper.make_node("Cast", ["sliced"], ["as_float"], to=TensorProto.FLOAT))
    final = "raw"
    if kind == "finite":
        nodes.append(helper.make_node("Add", ["as_float", "one"], [final]))
    elif kind == "nan":
        nodes.append(helper.make_node("Mul", ["as_float", "nan"], [final]))
    elif kind == "zero":
        nodes.append(helper.make_node("Mul", ["as_float", "zero"], [final]))
    elif kind == "sqrt-shifted":
        nodes.append(helper.make_node("Sub", ["as_float", "five"], ["shifted"]))
        nodes.append(helper.make_node("Sqrt", ["shifted"], [final]))
    elif kind == "mask-sum":
        inits.append(numpy_helper.from_array(np.array([1], dtype=np.int64), "keep_axis"))
        nodes.append(helper.make_node("Add", ["as_float", "one"], ["base"]))
        nodes.append(helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT))
        nodes.append(
            helper.make_node("ReduceSum", ["mask_f", "keep_axis"], ["mask_sum"], keepdims=1)
        )
        nodes.append(helper.make_node("Add", ["base", "mask_sum"], [final]))
    else:
        raise ValueError(kind)
    out_shape: list[int | str] = (
        ["batch", dimension] if output_rank == 2 else ["batch", 1, dimension]
    )
    if output_rank != 2:
        inits.append(
            numpy_helper.from_array(np.array([-1, 1, dimension], dtype=np.int64), "shape3")
        )
        nodes.append(helper.make_node("Reshape", [final, "shape3"], ["reshaped"]))
        final = "reshaped"
    nodes.append(helper.make_node("Identity", [final], [output_name]))
    graph = helper.make_graph(
        nodes,
        "test-graph",
        inputs,
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, out_shape)],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def broken_service(service: EmbeddingService, directory: Path) -> EmbeddingService:
    """The real tokenizer with a graph that returns NaN for ids below 5 (EOS is 1): a 500."""
    encoder = OnnxEncoder(
        save_graph(directory / "nan.onnx", kind="sqrt-shifted"),
        output_name="text_embeds",
        dimension=32,
        max_length=64,
        config=SessionConfig(intra_op_threads=1),
    )
    return EmbeddingService(service.manifest, service.tokenizer, encoder)
