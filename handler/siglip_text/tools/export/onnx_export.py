"""Export a SigLIP / SigLIP 2 text tower to ONNX, and save ONNX graphs (one file, or the graph
plus one ``.data`` file). Exporting needs the ``export`` extra (torch).

The graph takes ``input_ids`` ``[batch, L]`` int64 only (no attention mask: SigLIP attends to
every position) and returns ``text_embeds`` = the pooled output after the head, not
normalized: the server normalizes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PROTOBUF_LIMIT = 2 * 1024**3
DEFAULT_OPSET = 17


def text_tower(model: Any) -> Any:
    """The text transformer of a SiglipModel / Siglip2Model / *TextModel."""
    return getattr(model, "text_model", model)


def export_text_tower(
    model: Any,
    path: Path,
    *,
    max_length: int,
    opset: int = DEFAULT_OPSET,
    external_data: bool | None = None,
    fusible: bool = False,
) -> None:
    """Write ``path``, and ``path.data`` when the weights exceed protobuf's 2 GB limit.

    ``fusible`` exports `fusible.fusible_tower` (the same outputs, written for ONNX
    Runtime's fused kernels, last layer at the pooled position only) instead of
    transformers' own forward.

    ``external_data`` forces (True) or forbids (False) the ``.data`` file; None decides by
    size. The exporter itself writes one file per tensor next to a graph over 2 GB, so it
    writes into a scratch directory and only the final files reach ``path``'s directory
    (`trace_text_tower`, then `place_graph`).
    """
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".export-", dir=path.parent) as scratch:
        staged = trace_text_tower(
            model, Path(scratch) / path.name, max_length=max_length, opset=opset, fusible=fusible
        )
        place_graph(staged, path, external_data=external_data)


def trace_text_tower(
    model: Any, staged: Path, *, max_length: int, opset: int, fusible: bool
) -> Path:
    """``torch.onnx.export`` of the text tower to ``staged`` (in a scratch directory: over
    2 GB the exporter writes one file per tensor beside it). Returns ``staged``."""
    import warnings

    import torch

    tower = text_tower(model).eval()

    class PooledText(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            pooled: torch.Tensor = self.inner(input_ids=input_ids).pooler_output
            return pooled

    if fusible:
        from .fusible import fusible_tower

        wrapper = fusible_tower(tower)
    else:
        wrapper = PooledText(tower).eval()
    example = torch.zeros((1, max_length), dtype=torch.long)
    with torch.no_grad(), warnings.catch_warnings():
        # The trace is taken at the contract's fixed length; shape checks in the model's
        # Python code become constants, which is what the fixed-length graph wants.
        warnings.simplefilter("ignore", getattr(torch.jit, "TracerWarning", RuntimeWarning))
        torch.onnx.export(
            wrapper,
            (example,),
            str(staged),
            input_names=["input_ids"],
            output_names=["text_embeds"],
            dynamic_axes={"input_ids": {0: "batch"}, "text_embeds": {0: "batch"}},
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )
    return staged


def place_graph(staged: Path, path: Path, *, external_data: bool | None) -> None:
    """Move the exporter's output at ``staged`` to ``path``: as it is when it is one file
    and one file is wanted, else re-saved as one graph file (plus one ``.data`` file).

    Over 2 GB the exporter writes one file per tensor: those are copied into the ``.data``
    file a tensor at a time (`save_streaming`), never all held at once."""
    if external_data and len(list(staged.parent.iterdir())) > 1:
        import onnx

        save_streaming(onnx.load(str(staged), load_external_data=False), path, staged.parent)
    elif external_data or len(list(staged.parent.iterdir())) > 1:
        import onnx

        save_onnx(onnx.load(str(staged)), path, external_data=external_data)
    else:
        external_data_path(path).unlink(missing_ok=True)
        staged.replace(path)


def external_data_path(path: Path) -> Path:
    """Where a graph's weights go when they are stored outside it: ``text_model.onnx.data``."""
    return path.with_name(path.name + ".data")


def save_onnx(model: Any, path: Path, *, external_data: bool | None = None) -> None:
    """Save an ``onnx.ModelProto``: one file, or the graph plus one ``.data`` file.

    None decides by size: external data when the initializers approach protobuf's 2 GB
    limit. A stale ``.data`` file is removed first (onnx appends to an existing one).
    """
    import onnx

    if external_data is None:
        weights = sum(_tensor_bytes(t) for t in model.graph.initializer)
        external_data = weights >= PROTOBUF_LIMIT - 64 * 1024**2
    data = external_data_path(path)
    data.unlink(missing_ok=True)
    if external_data:
        onnx.save_model(
            model,
            str(path),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=data.name,
            size_threshold=1024,
        )
        # onnx creates the data file owner-only (0600); a bundle copied into an image that
        # runs as another user (Lambda does) must stay readable, like the graph file.
        data.chmod(0o644)
    else:
        onnx.save_model(model, str(path))


def save_streaming(model: Any, path: Path, source: Path) -> None:
    """``save_onnx(model, path, external_data=True)`` for a model whose large tensors still
    point at their external files under ``source`` (loaded with ``load_external_data=False``).

    Writes the same bytes as loading every tensor and then saving (onnx's
    ``load_external_data_for_model`` then ``save_model(save_as_external_data=True,
    all_tensors_to_one_file=True, size_threshold=1024)``): the same steps, in the same
    order, one tensor at a time, so that only one tensor's data is held at once.
    """
    import sys

    import onnx
    from onnx import external_data_helper as helper

    data = external_data_path(path)
    data.unlink(missing_ok=True)
    for tensor in helper._get_initializer_tensors(model):
        if helper.uses_external_data(tensor):
            load_inline(tensor, source)
        if tensor.HasField("raw_data") and sys.getsizeof(tensor.raw_data) >= 1024:
            helper.set_external_data(tensor, data.name)
            helper.save_external_data(tensor, str(path.parent))
            tensor.ClearField("raw_data")
    # Attribute tensors (Constant nodes) stay inside the graph, as save_model leaves them.
    for tensor in helper._get_attribute_tensors(model):
        if helper.uses_external_data(tensor):
            load_inline(tensor, source)
    onnx.save_model(model, str(path))
    if data.exists():
        data.chmod(0o644)


def load_inline(tensor: Any, source: Path) -> None:
    """Read a tensor's external data (files under ``source``) into it, and leave it as a
    tensor that was never stored outside the graph: no location fields (onnx's
    ``load_external_data_for_model`` sets ``data_location`` to DEFAULT instead, which
    serializes as one more field)."""
    from onnx import external_data_helper as helper

    helper.load_external_data_for_tensor(tensor, str(source))
    tensor.ClearField("data_location")
    del tensor.external_data[:]


def _tensor_bytes(tensor: Any) -> int:
    import numpy as np
    from onnx import helper

    if tensor.raw_data:
        return len(tensor.raw_data)
    count = int(np.prod(tensor.dims)) if tensor.dims else 1
    return count * np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
