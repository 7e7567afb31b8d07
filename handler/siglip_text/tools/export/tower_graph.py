"""The tower's fp32 graph, fused or plain: `build_graph` exports it (`onnx_export`) and, for the
fast graph, fuses it for ONNX Runtime's fused CPU kernels (`fuse_graph`).

Two levers, each guarded by the export's check against PyTorch (``checks.py``: fp32 cosine
at least 0.99999 on the contract's edge cases):

- **fusible attention** (`fusible.FusibleTextTower`): the same arithmetic as transformers'
  forward, written in the shape ``onnxruntime.transformers``' BERT fusions recognise (``q @ k^T /
  sqrt(d)`` then ``Softmax`` with no mask), so that `fuse_graph` turns each layer's
  attention into one ``Attention`` node (QKV in one GEMM, the attention products inside
  the kernel) and its GELU into ``FastGelu``; for int8 ``quantize_dynamic`` then makes
  ``QAttention`` of each ``Attention``.
- **only the pooled position in the last layer**: the output is the last position's hidden
  state, and nothing after the last layer's keys and values mixes positions, so the last
  layer computes keys and values for all positions but queries, attention output, MLP,
  final LayerNorm and head for that one position (about 7% of a 12-layer tower's
  arithmetic). Exact: the same sums on the same numbers, in a different order at most.

Needs torch (the export extra) for the tower and ``onnxruntime.transformers`` for the fusion.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...engine.bundle import GraphBuild
from ..exit_status import ToolError
from .checkpoint import SourceSpec, load_checkpoint
from .fusible import tower_shape
from .memory import release_memory
from .onnx_export import (
    external_data_path,
    place_graph,
    save_onnx,
    save_streaming,
    trace_text_tower,
)

#: The fused operators counted in the manifest.
FUSED_OPERATORS = ("Attention", "FastGelu")


def build_graph(
    tower: Any,
    path: Path,
    *,
    max_length: int,
    opset: int,
    external_data: bool | None,
    fuse: bool = True,
) -> GraphBuild:
    """Export the fp32 graph to ``path``: fused (`fusible_tower` + `fuse_graph`) or plain.

    Takes the tower over: once traced it is freed (when the caller holds no other reference,
    as the export pipeline does with ``Checkpoint.release_tower``), before the graph is
    written out and fused, so the PyTorch weights and the ONNX graph are not held at once.
    """
    layers, heads, hidden = tower_shape(tower)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".export-", dir=path.parent) as scratch:
        staged = trace_text_tower(
            tower, Path(scratch) / path.name, max_length=max_length, opset=opset, fusible=fuse
        )
        del tower
        release_memory()
        place_graph(staged, path, external_data=external_data)
    release_memory()
    if not fuse:
        return GraphBuild(forward="transformers", last_layer="all positions")
    fused = fuse_graph(path, layers=layers, heads=heads, hidden=hidden)
    release_memory()
    return GraphBuild(forward="fusible", last_layer="pooled position only", fused_operators=fused)


#: int8 exports of towers with more fp32 weights than this trace them in a child process
#: (`build_graph_in_child`); smaller ones (the tests' tiny towers) in this one.
CHILD_PROCESS_BYTES = 256 * 1024**2


def build_graph_in_child(spec: SourceSpec, path: Path, **options: Any) -> GraphBuild:
    """`build_graph` in a child process that loads the tower from ``spec`` itself and exits
    once the graph is written (``options``: `build_graph`'s): the same files, without what
    the trace leaves behind here.

    ``torch.onnx.export`` (TorchScript, torch 2.13) keeps references to the parameters of
    the modules it traces after it returns (measured on a transformers SigLIP 2 tower: every
    layer's weights stay alive, unreachable from Python; a plain ``torch.nn.LayerNorm`` with
    an attribute set on its parameter, as transformers sets ``_is_hf_initialized``, leaks
    too). The tower's weights, memory-mapped from the checkpoint, then stay resident for
    the rest of the export, beside the quantizer's copies (docs/sizes.md). A process that
    exits returns all of it. The caller drops its own tower before this starts, and
    uses this for int8 (export.steps.graph): an fp32 export peaks in the trace itself, and a
    child beside the caller holds more then than the caller alone.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")  # no copy of this process's memory
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(_child_build, spec, path, options).result()


def _child_build(spec: SourceSpec, path: Path, options: dict[str, Any]) -> GraphBuild:
    return build_graph(load_checkpoint(spec, tokenizer=False).release_tower(), path, **options)


@contextlib.contextmanager
def _working_directory(directory: Path) -> Iterator[None]:
    """Run the block in ``directory`` (onnx resolves a tensor's external file from it)."""
    previous = Path.cwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(previous)


def fuse_graph(path: Path, *, layers: int, heads: int, hidden: int) -> dict[str, int]:
    """Apply ``onnxruntime.transformers``' BERT fusions to ``path`` in place.

    Returns the fused operator counts. Raises ToolError when the graph did not fuse as
    the tower's shape says it must (one ``Attention`` per layer but the last, a
    ``FastGelu`` per layer): an unfused graph would be served silently slower.
    """
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    options = FusionOptions("bert")
    options.enable_embed_layer_norm = False  # SigLIP has no token-type embedding
    # SkipLayerNormalization (residual Add + LayerNorm in one kernel) is slower than the Add
    # and LayerNormalization it replaces on ONNX Runtime's CPU kernels (docs/performance.md,
    # the levers measured).
    options.enable_skip_layer_norm = False
    options.enable_bias_skip_layer_norm = False
    import onnx

    # With a .data file, the graph is fused without its weights in memory: each tensor stays
    # a reference into the file, read when a fusion needs its numbers (the query, key and
    # value weights it concatenates: the relative references resolve from the graph's
    # directory) and copied a tensor at a time when saved (graph.save_streaming): the
    # same bytes as loading it all, without holding it all.
    streamed = external_data_path(path).exists()
    source = onnx.load(str(path), load_external_data=not streamed)
    level = logging.getLogger("onnxruntime.transformers").level
    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    try:
        with _working_directory(path.parent if streamed else Path.cwd()):
            model = optimize_model(
                source,
                model_type="bert",
                num_heads=heads,
                hidden_size=hidden,
                optimization_options=options,
                opt_level=0,
                use_gpu=False,
            )
    finally:
        logging.getLogger("onnxruntime.transformers").setLevel(level)
    counts = collections.Counter(node.op_type for node in model.model.graph.node)
    fused = {op: int(counts.get(op, 0)) for op in FUSED_OPERATORS}
    # The last layer computes one query, which is not the fused pattern: it stays unfused.
    wanted = {"Attention": layers - 1, "FastGelu": layers}
    missing = {op: (fused[op], n) for op, n in wanted.items() if fused[op] < n}
    if missing:
        raise ToolError(
            "the ONNX Runtime fusions did not apply as expected ("
            + ", ".join(f"{op} {got} of {n}" for op, (got, n) in missing.items())
            + "); export with --plain-graph to keep transformers' own forward"
        )
    from onnx import helper

    if not any(entry.domain == "com.microsoft" for entry in model.model.opset_import):
        # ONNX Runtime runs the fused ops without it; onnx's shape inference (quantize) not.
        model.model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    scratch = Path(tempfile.mkdtemp(prefix=".fuse-", dir=path.parent))
    try:
        staged = scratch / path.name
        if streamed:
            with _working_directory(path.parent):
                save_streaming(model.model, staged, path.parent)
        else:
            save_onnx(model.model, staged, external_data=False)
        external_data_path(path).unlink(missing_ok=True)
        if external_data_path(staged).exists():
            external_data_path(staged).replace(external_data_path(path))
        staged.replace(path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return fused
