"""Export a SigLIP / SigLIP 2 text tower to ONNX. Needs the ``export`` extra (torch).

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
    model: Any, path: Path, *, max_length: int, opset: int = DEFAULT_OPSET
) -> None:
    """Write ``path`` (and ``path.data`` when the weights exceed protobuf's 2 GB limit)."""
    import torch

    tower = text_tower(model).eval()

    class PooledText(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.inner(input_ids=input_ids).pooler_output

    wrapper = PooledText(tower).eval()
    size = sum(p.numel() * p.element_size() for p in wrapper.parameters())
    example = torch.zeros((1, max_length), dtype=torch.long)
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(
            wrapper,
            (example,),
            str(path),
            input_names=["input_ids"],
            output_names=["text_embeds"],
            dynamic_axes={"input_ids": {0: "batch"}, "text_embeds": {0: "batch"}},
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )
    if size >= PROTOBUF_LIMIT - 64 * 1024**2:
        _move_to_external_data(path)


def _move_to_external_data(path: Path) -> None:
    import onnx

    model = onnx.load(str(path))
    onnx.save_model(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=path.name + ".data",
        size_threshold=1024,
    )
