"""A Hugging Face SigLIP / SigLIP 2 checkpoint and its transformers text path.

Needs the ``export`` extra (torch, transformers). This is the "GPU path" the bundle is
compared with: the contract's ids (``contract_token_ids``), built from the content ids of
the checkpoint's own tokenizer.json (``file_tokenizer``; text lowercased in Python, no
special tokens added, special-token strings as text) plus the contract's own ``<eos>`` and
padding, and the PyTorch text tower fed the ids alone (no attention mask). How the installed
transformers itself loads and post-processes the tokenizer is recorded beside it
(``direct_call_token_ids``), never used as the reference.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...engine.bundle import Lowercase
from ...engine.contract import REVISION_PATTERN
from ..exit_status import ToolError
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
    #: The checkpoint's own ``tokenizer.json`` (None when it ships only a slow tokenizer):
    #: the bundle's tokenizer is made from this file, never from the tokenizer transformers
    #: built from it, which may hold tokens transformers added (``<mask>``, transformers 5).
    tokenizer_file: Path | None = None

    def release_tower(self) -> Any:
        """Hand the tower over and drop this checkpoint's reference to it.

        The export passes it straight to the ONNX export (optimize.build_graph), which frees
        it once the graph is traced: the PyTorch weights are not held beside the ONNX graphs.
        """
        tower, self.tower = self.tower, None
        if tower is None:
            raise ToolError("the checkpoint's tower was already released")
        return tower

    @property
    def max_positions(self) -> int:
        return int(self.tower.config.max_position_embeddings)

    @property
    def embedding_rows(self) -> int:
        """Rows of the text tower's token embedding table: the ids the graph can embed."""
        table = getattr(getattr(self.tower, "embeddings", None), "token_embedding", None)
        if table is not None:
            return int(table.num_embeddings)
        return int(self.tower.config.vocab_size)


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
        from .revision import how_to_find_sha

        repository = source if source.count("/") == 1 else "<repository>"
        raise ToolError(
            f"--revision {revision!r} is not a full 40-character commit SHA (tags and branch "
            f"names are mutable; export resolves them for a Hub id when the Hub can be "
            f"reached): {how_to_find_sha(repository, revision)}"
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
            "to export (the manifest must name an immutable revision), or a branch or tag "
            "(e.g. --revision main) to have it resolved to the SHA once"
        )
    return SourceSpec(source, "hub", revision)


def load_checkpoint(
    spec: SourceSpec,
    *,
    device: str = "cpu",
    dtype: str = "float32",
    text_only: bool = True,
    tokenizer: bool = True,
) -> Checkpoint:
    """Load with transformers; a full SigLIP model keeps its logit scale and bias.
    ``tokenizer=False`` loads the model alone (``Checkpoint.tokenizer`` is None)."""
    import torch
    import transformers
    from transformers import AutoTokenizer

    hub = {"revision": spec.revision} if spec.kind == "hub" and spec.revision else {}
    model_type = read_config(spec)[1]
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
    loaded = None
    if tokenizer:
        try:
            loaded = AutoTokenizer.from_pretrained(spec.source, **hub)
        except (OSError, ValueError) as exc:
            raise ToolError(f"{spec.source}: cannot load the tokenizer ({exc})") from None
    from transformers.utils.hub import cached_file

    found = cached_file(
        spec.source, "tokenizer.json", _raise_exceptions_for_missing_entries=False, **hub
    )
    return Checkpoint(
        source=spec.source,
        model_type=model_type,
        architecture=architecture,
        tower=tower,
        tokenizer=loaded,
        logit_scale=float(scale.detach().reshape(-1)[0]) if scale is not None else None,
        logit_bias=float(bias.detach().reshape(-1)[0]) if bias is not None else None,
        tokenizer_file=Path(found) if found else None,
    )


def checkpoint_directory(spec: SourceSpec) -> Path:
    """The directory the checkpoint's files are in: a local directory as given, a Hub
    checkpoint's snapshot in the cache (where loading it put its weights and tokenizer)."""
    if spec.kind == "local":
        return Path(spec.source)
    from transformers.utils.hub import cached_file

    hub = {"revision": spec.revision} if spec.revision else {}
    found = cached_file(spec.source, "config.json", **hub)
    if not found:
        raise ToolError(f"{spec.source}: config.json is not in the local cache")
    return Path(found).parent


def read_config(spec: SourceSpec) -> tuple[Any, str]:
    """The checkpoint's transformers config (None when transformers has no class for it)
    and its ``model_type``; a ToolError when neither can be read. Reads config.json alone
    (from the Hub: that file only), no weights."""
    from transformers import AutoConfig

    hub = {"revision": spec.revision} if spec.kind == "hub" and spec.revision else {}
    try:
        config = AutoConfig.from_pretrained(spec.source, **hub)
        return config, str(getattr(config, "model_type", ""))
    except (OSError, ValueError) as exc:
        # transformers 4.57 has Siglip2TextModel but no AutoConfig entry for the
        # "siglip2_text_model" it saves: the model class reads its own config
        model_type = _declared_model_type(spec)
        if model_type not in MODEL_CLASSES:
            raise ToolError(f"{spec.source}: cannot read the model config ({exc})") from None
        return None, model_type


def _declared_model_type(spec: SourceSpec) -> str:
    """``model_type`` as a local directory's config.json states it ("" when unreadable)."""
    if spec.kind != "local":
        return ""
    try:
        value = json.loads((Path(spec.source) / "config.json").read_text()).get("model_type")
    except (OSError, ValueError, AttributeError):
        return ""
    return value if isinstance(value, str) else ""


def file_tokenizer(checkpoint: Checkpoint) -> Any:
    """The checkpoint's ``tokenizer.json`` as written (a ``tokenizers.Tokenizer``).

    What the bundle's tokenizer is made from, and the source of the contract's content ids:
    read with ``tokenizers`` alone, so that nothing the installed transformers does when it
    loads a tokenizer (rebuilding its post-processor, adding ``<mask>``, adding a lowercasing
    step, as transformers 5's ``Siglip2Tokenizer`` does) reaches the bundle or its reference.
    A checkpoint with no ``tokenizer.json`` falls back to transformers' conversion.
    """
    from tokenizers import Tokenizer

    if checkpoint.tokenizer_file is not None:
        try:
            return Tokenizer.from_file(str(checkpoint.tokenizer_file))
        except Exception as exc:  # tokenizers raises plain Exception on a bad file
            first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise ToolError(f"{checkpoint.tokenizer_file}: cannot be loaded ({first})") from None
    backend = getattr(checkpoint.tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ToolError(
            "the checkpoint's tokenizer has no tokenizer.json form (a fast tokenizer is needed)"
        )
    return Tokenizer.from_str(backend.to_str())


def token_id(tokenizer: Any, token: str) -> int:
    """The id of ``token`` (a transformers or ``tokenizers`` tokenizer); a ToolError if none."""
    if hasattr(tokenizer, "token_to_id"):  # tokenizers.Tokenizer
        value = tokenizer.token_to_id(token)
    else:
        value = tokenizer.convert_tokens_to_ids(token)
        if value == getattr(tokenizer, "unk_token_id", None) and token != tokenizer.unk_token:
            value = None
    if not isinstance(value, int):
        raise ToolError(
            f"the checkpoint tokenizer has no {token} token; a SigLIP 2 tokenizer needs <pad> "
            "and <eos>"
        )
    return value


def content_token_ids(
    tokenizer: Any, texts: Sequence[str], *, lowercase: Lowercase
) -> list[list[int]]:
    """The tokenizer's ids for the lowercased texts, nothing added.

    No special tokens are added (whatever the post-processor or the installed transformers
    would add) and special-token strings in the text are text, as SentencePiece tokenized
    SigLIP 2's training text. ``tokenizer`` is a ``tokenizers.Tokenizer`` (see
    file_tokenizer; its padding and truncation are turned off, and special-token splitting
    on) or a transformers tokenizer (called with ``split_special_tokens=True``).
    """
    lowered = [lower_text(t, lowercase) for t in texts]
    if hasattr(tokenizer, "encode_batch"):  # tokenizers.Tokenizer: set up for this, in place
        tokenizer.no_padding()
        tokenizer.no_truncation()
        tokenizer.encode_special_tokens = True
        return [e.ids for e in tokenizer.encode_batch(lowered, add_special_tokens=False)]
    encoded = tokenizer(
        lowered,
        add_special_tokens=False,
        split_special_tokens=True,
        padding=False,
        truncation=False,
        verbose=False,
    )
    return [list(map(int, ids)) for ids in encoded["input_ids"]]


def contract_token_ids(
    tokenizer: Any, texts: Sequence[str], *, lowercase: Lowercase, max_length: int
) -> list[list[int]]:
    """The SigLIP 2 contract's ids: the first ``L-1`` content ids, ``<eos>``, ``<pad>`` to ``L``.

    The one reference the project builds (export, ``reference``, ``verify`` and the tests):
    it takes only content ids from the checkpoint tokenizer, so it does not depend on how
    the installed transformers builds the tokenizer's post-processing (transformers 4 from
    ``add_bos_token``/``add_eos_token``, transformers 5 from ``tokenizer.json``).
    """
    eos, pad = token_id(tokenizer, "<eos>"), token_id(tokenizer, "<pad>")
    rows = []
    for ids in content_token_ids(tokenizer, texts, lowercase=lowercase):
        row = ids[: max_length - 1] + [eos]
        rows.append(row + [pad] * (max_length - len(row)))
    return rows


def direct_call_token_ids(
    tokenizer: Any,
    texts: Sequence[str],
    *,
    lowercase: Lowercase,
    max_length: int,
    split_special_tokens: bool = True,
) -> list[list[int]]:
    """What a GPU pipeline that calls the tokenizer directly gets, as transformers documents
    SigLIP 2 (``padding="max_length"``, ``max_length=64``, truncation), lowercased text.

    Not a reference: it depends on the installed transformers (see contract_token_ids).
    Export records how it differs from the contract.
    """
    encoded = tokenizer(
        [lower_text(t, lowercase) for t in texts],
        padding="max_length",
        max_length=max_length,
        truncation=True,
        split_special_tokens=split_special_tokens,
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
