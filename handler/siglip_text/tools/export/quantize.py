"""int8 text towers: ONNX Runtime dynamic quantization plus a per-row int8 token table.

Needs ``onnx`` and ``onnxruntime.quantization`` (no torch). Two parts:

- every ``MatMul`` with a constant weight becomes ``DynamicQuantizeLinear`` +
  ``MatMulInteger`` (int8 weights, one scale per output column), via ``quantize_dynamic``;
- the token embedding table (256k rows, about 70% of a base tower) becomes int8 with one
  scale per row: ``Gather(int8 table) -> Cast -> Mul(Gather(row scales))``.

``quantize_dynamic`` can quantize a ``Gather`` itself (``op_types_to_quantize=["Gather"]``)
but with a single uint8 scale and zero point for the whole table, so one outlying row sets
the step for all 256k; a scale per row keeps each token's own range and costs 4 bytes a row.

The weights' integer range (``WEIGHT_FORMS``) decides whether every CPU computes the same
products. ONNX Runtime's x86 U8S8 kernels for AVX2 (and AVX-512 without VNNI) multiply
uint8 activations by int8 weights with ``vpmaddubsw``, which adds each pair of products and
saturates the sum at 32,767: with activations up to 255, int8 weights of magnitude above 64
can overflow it and the result is silently wrong (255 x 127 x 2 = 64,770). ``int7`` weights
(``reduce_range``: -64..64) cannot: 255 x 64 x 2 = 32,640. ``uint8`` weights go through the
U8U8 kernels, which widen to 16 bits before multiplying. ``int8`` (full range) is exact only
on VNNI, AVX (SSE path) and arm64 kernels. `pair_bound` is the proof a test checks.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...engine.bundle import Quantization, TokenEmbedding, WeightForm
from .onnx_export import PROTOBUF_LIMIT, external_data_path, save_onnx

#: The MatMul weight forms, and whether each is exact on every kernel (saturation-free).
WEIGHT_FORMS: dict[str, str] = {
    "int7": "int8 weights in -64..64 (7-bit, reduce_range): no pair of uint8 x int8 products "
    "can pass 32,767, so every x86 kernel (vpmaddubsw included) and arm64 compute them exactly",
    "int8": "int8 weights in -127..127: exact on VNNI, AVX and arm64 kernels, SATURATES on "
    "AVX2 and AVX-512 without VNNI (vpmaddubsw)",
    "uint8": "uint8 weights (U8U8 kernels widen to 16 bits): exact on every kernel",
}
DEFAULT_WEIGHT_FORM: WeightForm = "int7"

#: vpmaddubsw's limit: each sum of two uint8 x int8 products saturates at this value.
PAIR_LIMIT = 32_767
ACTIVATION_MAX = 255  # DynamicQuantizeLinear's uint8 activations: 0..255


def pair_bound(weights: np.ndarray) -> int:
    """The largest magnitude a sum of two uint8 x int8 products can reach with these int8
    weights (activations 0..255): 255 times the two largest magnitudes, however the kernel
    pairs them. At most `PAIR_LIMIT` means ``vpmaddubsw`` cannot saturate on them."""
    magnitudes = np.sort(np.abs(weights.astype(np.int32)).ravel())
    if magnitudes.size == 0:
        return 0
    return int(ACTIVATION_MAX * magnitudes[-2:].sum())


@dataclass(frozen=True)
class QuantizationInfo:
    """What was quantized, for the manifest."""

    matmul_weights: int
    token_table: str | None  # initializer name, None when no table was found
    token_table_shape: tuple[int, ...] | None
    attention_nodes: int = 0  # fused Attention nodes made QAttention
    per_channel: bool = True
    weight_form: WeightForm = DEFAULT_WEIGHT_FORM
    largest_pair: int | None = None  # pair_bound over every integer weight (int7/int8)

    def record(self) -> Quantization:
        """The manifest's ``quantization``; init reads its ``saturation_free``."""
        weights = "per column" if self.per_channel else "per tensor"
        ops = "MatMul and fused Attention" if self.attention_nodes else "MatMul"
        kind = {"int7": "int8 (7-bit range)", "int8": "int8", "uint8": "uint8"}[self.weight_form]
        saturation_free = self.weight_form == "uint8" or (
            self.largest_pair is not None and self.largest_pair <= PAIR_LIMIT
        )
        return Quantization(
            method=f"onnxruntime quantize_dynamic ({ops}, {kind} weights {weights}, uint8 "
            "activations) + token embedding int8 per row",
            weight_form=self.weight_form,
            weight_form_note=WEIGHT_FORMS[self.weight_form],
            saturation_free=saturation_free,
            largest_pair_of_products=self.largest_pair,
            matmul_integer_nodes=self.matmul_weights,
            qattention_nodes=self.attention_nodes,
            token_embedding=(
                TokenEmbedding(
                    initializer=self.token_table,
                    shape=[int(d) for d in self.token_table_shape or ()],
                )
                if self.token_table
                else None
            ),
        )


def quantize_int8(
    source: Path,
    target: Path,
    *,
    external_data: bool | None = None,
    per_channel: bool = True,
    weight_form: WeightForm = DEFAULT_WEIGHT_FORM,
) -> QuantizationInfo:
    """Write an int8 version of the fp32 graph ``source`` at ``target``.

    ``external_data`` as in ``onnx_export.save_onnx`` (None: by size). A fused ``Attention``
    (tower_graph.fuse_graph) becomes ``QAttention``: the QKV product in int8, the attention
    products in fp32 inside the kernel. ``per_channel``: one weight scale per output column
    (default) or one per tensor. ``weight_form``: see `WEIGHT_FORMS`.

    Memory: ``quantize_dynamic`` loads every weight of the graph it is given (and holds the
    fp32 and int8 forms at once), but never touches the token table, which is most of a
    tower's weights. So it is given the graph with the table replaced by a one-row stand-in
    of the same width (`TokenTable.stand_in`); the table is quantized here, its rows read
    from ``source`` in blocks, and the result is saved a tensor at a time. The files are
    the same bytes as quantizing the whole graph in memory.
    """
    import onnx
    from onnx.external_data_helper import load_external_data_for_model
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from .onnx_export import save_streaming

    # A graph whose weights are in a .data file is quantized through files and saved a
    # tensor at a time; a single-file graph (under 2 GB) in memory, as onnx loads it.
    large = external_data_path(source).exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    graph = onnx.load(str(source), load_external_data=False)
    table = find_token_table(graph)
    with tempfile.TemporaryDirectory(prefix=".quantize-", dir=target.parent) as scratch:
        staged = Path(scratch) / target.name
        # The graph given to quantize_dynamic: beside ``source`` when its tensors name a
        # weights file there (onnx resolves external data relative to the graph file),
        # else self-contained in the scratch directory.
        lean = (source.parent if large else Path(scratch)) / f".{Path(scratch).name}-{source.name}"
        try:
            if table is not None:
                table.stand_in(graph)
            onnx.save_model(graph, str(lean))
            del graph
            logging.disable(logging.WARNING)  # its advice to pre-process applies to CNNs
            try:
                quantize_dynamic(
                    lean,
                    staged,
                    op_types_to_quantize=["MatMul", "Attention"],
                    per_channel=per_channel,
                    weight_type=QuantType.QUInt8 if weight_form == "uint8" else QuantType.QInt8,
                    reduce_range=weight_form == "int7",
                    use_external_data_format=large,
                    # onnx's shape inference knows no com.microsoft op (the fused Attention):
                    # what follows one is float.
                    extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
                )
            finally:
                logging.disable(logging.NOTSET)
        finally:
            lean.unlink(missing_ok=True)
        model = onnx.load(str(staged), load_external_data=False)
        if external_data is None:
            external_data = _weight_bytes(model) >= PROTOBUF_LIMIT - 64 * 1024**2
        streamed = large and external_data
        if not streamed:
            load_external_data_for_model(model, scratch)
        if table is not None:
            table.quantize_into(model, source.parent)
        matmuls = sum(1 for node in model.graph.node if node.op_type == "MatMulInteger")
        attention = sum(1 for node in model.graph.node if node.op_type == "QAttention")
        pairs = [pair_bound(w) for w in integer_weights(model, Path(scratch)) if w.dtype == np.int8]
        if streamed:
            save_streaming(model, target, Path(scratch))
        else:
            save_onnx(model, target, external_data=external_data)
    return QuantizationInfo(
        matmul_weights=matmuls,
        attention_nodes=attention,
        per_channel=per_channel,
        weight_form=weight_form,
        largest_pair=max(pairs) if pairs else None,
        token_table=table.name if table else None,
        token_table_shape=table.shape if table else None,
    )


@dataclass
class TokenTable:
    """The token embedding table of a graph (`find_token_table`): the largest 2-D float
    ``Gather`` table, used by that one node, gathered on axis 0."""

    name: str
    shape: tuple[int, int]
    tensor: Any  # a copy of its TensorProto as loaded (external data not read)

    def stand_in(self, model: Any) -> None:
        """Replace the table in ``model`` by one row of zeros under the same name: the same
        width, so shape inference and ``quantize_dynamic`` (which never quantizes a
        ``Gather``) make the same graph around it."""
        from onnx import numpy_helper

        initializers = model.graph.initializer
        position = next(i for i, init in enumerate(initializers) if init.name == self.name)
        row = numpy_helper.from_array(np.zeros((1, self.shape[1]), np.float32), self.name)
        initializers[position].CopyFrom(row)

    def rows(self, base_dir: Path) -> Any:
        """A function ``(start, stop) -> float32 rows`` reading the table from the graph's
        weights file (or from the tensor, when it is stored inside the graph)."""
        from onnx import numpy_helper
        from onnx.external_data_helper import ExternalDataInfo, uses_external_data

        width = self.shape[1]
        if not uses_external_data(self.tensor):
            table = numpy_helper.to_array(self.tensor).astype(np.float32, copy=False)
            return lambda start, stop: table[start:stop]
        info = ExternalDataInfo(self.tensor)
        path = base_dir / info.location
        offset = int(info.offset or 0)

        def read(start: int, stop: int) -> np.ndarray:
            count = (min(stop, self.shape[0]) - start) * width
            block = np.fromfile(path, dtype="<f4", count=count, offset=offset + start * width * 4)
            return block.reshape(-1, width)

        return read

    def quantize_into(self, model: Any, base_dir: Path) -> None:
        """Replace the stand-in in ``model`` (quantize_dynamic's output) by int8 rows and
        float32 row scales of the real table, read from ``base_dir``:
        ``Gather(int8 table) -> Cast -> Mul(Gather(row scales))``."""
        scale, quantized = quantize_rows(self.rows(base_dir), self.shape)
        _replace_gather(model, self.name, quantized, scale)


def find_token_table(model: Any) -> TokenTable | None:
    """The graph's token embedding table, or None when it has none (or when the table is
    also used by another node, e.g. tied weights, which is then left alone)."""
    from onnx import TensorProto

    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    users: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            users[name] = users.get(name, 0) + 1
    candidates = [
        initializers[node.input[0]]
        for node in graph.node
        if node.op_type == "Gather"
        and node.input[0] in initializers
        and len(initializers[node.input[0]].dims) == 2
        and users.get(node.input[0]) == 1
        and _axis(node) == 0
        and initializers[node.input[0]].data_type == TensorProto.FLOAT
    ]
    if not candidates:
        return None
    init = max(candidates, key=lambda t: int(np.prod(t.dims)))
    rows, width = (int(d) for d in init.dims)
    tensor = TensorProto()
    tensor.CopyFrom(init)  # kept apart from the graph, which `stand_in` changes
    return TokenTable(name=init.name, shape=(rows, width), tensor=tensor)


def _replace_gather(model: Any, name: str, quantized: np.ndarray, scale: np.ndarray) -> None:
    """``Gather(name)`` -> ``Gather(int8 rows) -> Cast -> Mul(Gather(row scales))``, the
    initializer ``name`` removed and the int8 rows, scales and axes appended."""
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    gather = next(n for n in graph.node if n.op_type == "Gather" and n.input[0] == name)
    init = next(i for i in graph.initializer if i.name == name)
    q_name, s_name = f"{name}_int8", f"{name}_row_scale"
    out = gather.output[0]
    ids = gather.input[1]
    graph.initializer.remove(init)
    graph.initializer.extend(
        [numpy_helper.from_array(quantized, q_name), numpy_helper.from_array(scale, s_name)]
    )
    axes = f"{name}_unsqueeze_axes"
    graph.initializer.append(numpy_helper.from_array(np.array([-1], dtype=np.int64), axes))
    position = list(graph.node).index(gather)
    new_nodes = [
        helper.make_node("Gather", [q_name, ids], [f"{out}_int8"], name=f"{gather.name}_int8"),
        helper.make_node(
            "Cast", [f"{out}_int8"], [f"{out}_float"], to=TensorProto.FLOAT, name=f"{out}_cast"
        ),
        helper.make_node("Gather", [s_name, ids], [f"{out}_scale"], name=f"{gather.name}_scale"),
    ]
    if _opset(model) >= 13:
        new_nodes.append(
            helper.make_node(
                "Unsqueeze", [f"{out}_scale", axes], [f"{out}_scale_col"], name=f"{out}_unsq"
            )
        )
    else:
        new_nodes.append(
            helper.make_node(
                "Unsqueeze", [f"{out}_scale"], [f"{out}_scale_col"], axes=[-1], name=f"{out}_unsq"
            )
        )
    new_nodes.append(
        helper.make_node("Mul", [f"{out}_float", f"{out}_scale_col"], [out], name=f"{out}_dequant")
    )
    graph.node.remove(gather)
    for offset, node in enumerate(new_nodes):
        graph.node.insert(position + offset, node)


#: The integer-GEMM operators and the input index of their constant weight (B).
INTEGER_GEMMS = {
    "MatMulInteger": 1,
    "QAttention": 1,
    "DynamicQuantizeMatMul": 1,
    "MatMulIntegerToFloat": 1,
}


def integer_weights(model: Any, base_dir: Path | None = None) -> list[np.ndarray]:
    """Every constant weight that feeds an integer GEMM (`INTEGER_GEMMS`) in ``model``; a
    weight stored outside the graph is read from ``base_dir``, one at a time."""
    from onnx import numpy_helper

    initializers = {init.name: init for init in model.graph.initializer}
    found: dict[str, np.ndarray] = {}
    for node in model.graph.node:
        index = INTEGER_GEMMS.get(node.op_type)
        if index is None or len(node.input) <= index:
            continue
        name = node.input[index]
        if name in initializers and name not in found:
            found[name] = numpy_helper.to_array(
                initializers[name], base_dir=str(base_dir) if base_dir else ""
            )
    return list(found.values())


def quantize_rows(
    rows: Any, shape: tuple[int, int], *, block: int = 16_384
) -> tuple[np.ndarray, np.ndarray]:
    """float32 row scales (``max |row| / 127``; 1 for a zero row) and int8 rows of a 2-D
    table of ``shape`` read ``block`` rows at a time by ``rows(start, stop)``.

    Each row's numbers depend on that row alone, so a block's are the same as over the
    whole table at once; only one block of floats is held (the whole table is several GB
    for so400m's 256k x 1152).
    """
    count, width = shape
    scale = np.empty(count, dtype=np.float32)
    quantized = np.empty((count, width), dtype=np.int8)
    for start in range(0, count, block):
        table = np.asarray(rows(start, start + block), dtype=np.float32)
        peak = np.abs(table).max(axis=1)
        step = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        scale[start : start + block] = step
        quantized[start : start + block] = np.clip(
            np.rint(table / step[:, None]), -127, 127
        ).astype(np.int8)
    return scale, quantized


def _weight_bytes(model: Any) -> int:
    from onnx import helper

    total = 0
    for tensor in model.graph.initializer:
        items = int(np.prod(tensor.dims)) if tensor.dims else 1
        total += items * np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
    return total


def _axis(node: Any) -> int:
    for attribute in node.attribute:
        if attribute.name == "axis":
            return int(attribute.i)
    return 0


def _opset(model: Any) -> int:
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return 0
