"""A Hugging Face SigLIP / SigLIP 2 checkpoint and its transformers text path.

Needs the ``export`` extra (torch, transformers). This is the "GPU path" the bundle is
compared with: the checkpoint's own tokenizer called as the transformers documentation
says (``padding="max_length"``, ``max_length=64``, truncation), on text lowercased in
Python, and the PyTorch text tower fed the ids alone (no attention mask).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...bundle import REVISION_PATTERN, Lowercase
from ..errors import ToolError
from ..lowercase import lower_text

#: config.json ``model_type`` -> the transformers class that loads it.
MODEL_CLASSES = {
    "siglip": "SiglipModel",
    "siglip2": "Siglip2Model",
    "siglip_text_model": "SiglipTextModel",
    "siglip2_text_model": "Siglip2TextModel",
}


@dataclass
class Checkpoint:
    """The loaded model (full or text-only), its text tower and its tokenizer."""

    source: str
    model_type: str
    architecture: str
    tower: Any
    tokenizer: Any
    logit_scale: float | None
    logit_bias: float | None

    @property
    def max_positions(self) -> int:
        return int(self.tower.config.max_position_embeddings)


@dataclass(frozen=True)
class SourceSpec:
    """Where the checkpoint comes from, validated before anything is loaded."""

    source: str
    kind: str  # "local" or "hub"
    revision: str | None


def resolve_source(source: str, *, revision: str | None, require_revision: bool) -> SourceSpec:
    """A local ``save_pretrained`` directory, or a Hub id pinned to a full commit SHA."""
    path = Path(source).expanduser()
    if revision is not None and not re.fullmatch(REVISION_PATTERN, revision):
        raise ToolError(
            f"--revision {revision!r} is not a full 40-character commit SHA; tags and branch "
            "names are mutable and refused"
        )
    if path.exists():
        if not path.is_dir():
            raise ToolError(f"{source}: not a directory written by save_pretrained")
        if not (path / "config.json").is_file():
            raise ToolError(f"{source}: no config.json (not a save_pretrained directory)")
        return SourceSpec(str(path), "local", revision)
    if source.startswith((".", "/", "~")) or source.count("/") > 1 or not source.strip():
        raise ToolError(f"{source}: no such directory, and not a Hugging Face model id")
    if require_revision and revision is None:
        raise ToolError(
            f"{source} is a Hugging Face model id: pass --revision with the full commit SHA "
            "to export (the manifest must name an immutable revision)"
        )
    return SourceSpec(source, "hub", revision)


def load_checkpoint(
    spec: SourceSpec, *, device: str = "cpu", dtype: str = "float32", text_only: bool = True
) -> Checkpoint:
    """Load with transformers; a full SigLIP model keeps its logit scale and bias."""
    import torch
    import transformers
    from transformers import AutoConfig, AutoTokenizer

    hub = {"revision": spec.revision} if spec.kind == "hub" and spec.revision else {}
    try:
        config = AutoConfig.from_pretrained(spec.source, **hub)
    except (OSError, ValueError) as exc:
        raise ToolError(f"{spec.source}: cannot read the model config ({exc})") from None
    model_type = str(getattr(config, "model_type", ""))
    if model_type not in MODEL_CLASSES:
        raise ToolError(
            f"{spec.source}: model_type {model_type!r} is not a SigLIP model "
            f"(expected one of {sorted(MODEL_CLASSES)})"
        )
    architecture = MODEL_CLASSES[model_type]
    # transformers 4.56 renamed torch_dtype to dtype
    major_minor = tuple(int(p) for p in transformers.__version__.split(".")[:2])
    dtype_key = "dtype" if major_minor >= (4, 56) else "torch_dtype"
    model = getattr(transformers, architecture).from_pretrained(
        spec.source, **{dtype_key: getattr(torch, dtype)}, **hub
    )
    model.eval()
    scale = getattr(model, "logit_scale", None)
    bias = getattr(model, "logit_bias", None)
    tower = getattr(model, "text_model", model)
    if text_only and tower is not model and hasattr(model, "vision_model"):
        model.vision_model = None  # free the image tower: only the text tower is exported
    tower = tower.to(device).eval()
    try:
        tokenizer = AutoTokenizer.from_pretrained(spec.source, **hub)
    except (OSError, ValueError) as exc:
        raise ToolError(f"{spec.source}: cannot load the tokenizer ({exc})") from None
    return Checkpoint(
        source=spec.source,
        model_type=model_type,
        architecture=architecture,
        tower=tower,
        tokenizer=tokenizer,
        logit_scale=float(scale.detach().reshape(-1)[0]) if scale is not None else None,
        logit_bias=float(bias.detach().reshape(-1)[0]) if bias is not None else None,
    )


def reference_token_ids(
    tokenizer: Any, texts: Sequence[str], *, lowercase: Lowercase, max_length: int
) -> list[list[int]]:
    """The checkpoint tokenizer as documented: lowercased text, max_length padding."""
    encoded = tokenizer(
        [lower_text(t, lowercase) for t in texts],
        padding="max_length",
        max_length=max_length,
        truncation=True,
    )
    return [list(map(int, ids)) for ids in encoded["input_ids"]]


def pooled_vectors(
    tower: Any, ids: Sequence[Sequence[int]], *, batch_size: int = 32, device: str = "cpu"
) -> np.ndarray:
    """The text tower's pooled output (not normalized), fed the ids alone, as float32."""
    import torch

    rows = []
    with torch.inference_mode():
        for start in range(0, len(ids), batch_size):
            batch = torch.tensor(list(ids[start : start + batch_size]), dtype=torch.long)
            output = tower(input_ids=batch.to(device)).pooler_output
            rows.append(output.float().cpu().numpy())
    return np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32)


def pick_device(requested: str) -> str:
    """``auto``: CUDA, else Apple MPS, else CPU."""
    import torch

    if requested != "auto":
        return requested
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"
