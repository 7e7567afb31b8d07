"""The real Gemma tokenizer (``../shared/fixtures/gemma-tokenizer``) and a tiny tower for it.

Found through ``SIGLIP_GEMMA_TOKENIZER_DIR`` (``.ci/run`` sets it to
``../shared/fixtures/gemma-tokenizer``; a relative path is taken from the repository root).
Tests that need it skip, naming the variable, when it is absent. The tokenizer is never
copied into the repository or a shipped bundle: only into pytest's temporary directories.

The tower is a ``Siglip2Model`` (its text tower) with the real 256,000-entry vocabulary and a hidden
size of 4, one layer: the table costs 4 MB, and 4 is the smallest width whose final
LayerNorm still spreads texts over a sphere (at 2 every pooled vector is one of two points,
at 3 on a circle), so the vectors the checks compare can still tell texts apart.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Literal

import pytest

from devkit.paths import ROOT
from devkit.tiny_checkpoint import perturbed

ENV = "SIGLIP_GEMMA_TOKENIZER_DIR"
SKIP_REASON = (
    f"the real Gemma tokenizer is absent: set {ENV} to a directory holding its tokenizer.json "
    "and tokenizer_config.json (.ci/run sets ../shared/fixtures/gemma-tokenizer)"
)
REPOSITORY = "test/siglip2-text-gemma-tokenizer-tiny-RANDOM"
REVISION = "fedcba9876543210fedcba9876543210fedcba98"
SEED = 20261201
HIDDEN = 4
VOCAB_SIZE = 256_000

#: ``bos``: Gemma's own post-processor (prepends ``<bos>``) beside SigLIP 2's config
#: (``add_bos_token: false``, ``add_eos_token: true``): transformers 4 and 5 disagree on it.
#: ``eos``: the post-processor ``$A <eos>``, as transformers 4's ``save_pretrained`` writes it.
Shape = Literal["bos", "eos"]
SHAPES: tuple[Shape, ...] = ("bos", "eos")


def tokenizer_dir() -> Path | None:
    """The fixture directory, or None when the variable is unset or names no tokenizer."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = ROOT / path
    if not (path / "tokenizer.json").is_file() or not (path / "tokenizer_config.json").is_file():
        return None
    return path


def tokenizer_dir_or_skip() -> Path:
    """The fixture directory; the test skips, saying how to provide it, where it is absent."""
    found = tokenizer_dir()
    if found is None:
        pytest.skip(SKIP_REASON)
    return found


def eos_post_processor() -> dict[str, Any]:
    """``TemplateProcessing(single="$A <eos>")`` in tokenizer.json's form."""
    from tokenizers import processors

    processor = processors.TemplateProcessing(
        single="$A <eos>", pair="$A:0 <eos>:0 $B:1 <eos>:1", special_tokens=[("<eos>", 1)]
    )
    return json.loads(processor.__getstate__())  # type: ignore[no-any-return]


def write_checkpoint_tokenizer(source: Path, directory: Path, *, shape: Shape) -> None:
    """tokenizer.json and tokenizer_config.json of a checkpoint of the given shape."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "tokenizer_config.json", directory / "tokenizer_config.json")
    if shape == "bos":
        shutil.copyfile(source / "tokenizer.json", directory / "tokenizer.json")
        return
    data = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    data["post_processor"] = eos_post_processor()
    (directory / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), "utf-8")


def siglip2_config(*, hidden: int, intermediate: int, layers: int, **text: Any) -> Any:
    """A ``Siglip2Config`` with the 256k vocabulary, Gemma's special-token ids, the given
    text tower (``text``: more of its settings) and a toy image tower."""
    from transformers import Siglip2Config

    return Siglip2Config(
        text_config={
            "vocab_size": VOCAB_SIZE,
            "hidden_size": hidden,
            "intermediate_size": intermediate,
            "num_hidden_layers": layers,
            "num_attention_heads": 2,
            "max_position_embeddings": 64,
            **text,
            "pad_token_id": 0,
            "eos_token_id": 1,
            "bos_token_id": 2,
        },
        vision_config={
            "hidden_size": 8,
            "intermediate_size": 16,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_patches": 4,
            "patch_size": 16,
        },
    )


def write_tower(directory: Path) -> None:
    """save_pretrained of a seeded random Siglip2Model with the 256k vocabulary.

    A full model (text and a toy image tower), as the Hub checkpoints are (and what
    transformers 5 loads with ``Siglip2Tokenizer``, a text-only save with ``GemmaTokenizer``).
    """
    import torch
    from transformers import Siglip2Model

    torch.manual_seed(SEED)
    config = siglip2_config(hidden=HIDDEN, intermediate=2 * HIDDEN, layers=1)
    perturbed(Siglip2Model(config).eval()).save_pretrained(directory)  # type: ignore[no-untyped-call]


def make_checkpoint(source: Path, directory: Path, *, shape: Shape, tower: Path) -> Path:
    """A checkpoint directory: the tower's files (``tower``, written once) and a tokenizer."""
    directory.mkdir(parents=True, exist_ok=True)
    for item in tower.iterdir():
        shutil.copyfile(item, directory / item.name)
    write_checkpoint_tokenizer(source, directory, shape=shape)
    return directory


def reference_tokenizer(source: Path) -> Any:
    """SigLIP 2's tokenizer as its conversion script configures it (no BOS, EOS appended)."""
    from transformers import GemmaTokenizerFast  # type: ignore[attr-defined]

    return GemmaTokenizerFast(
        tokenizer_file=str(source / "tokenizer.json"),
        add_bos_token=False,
        add_eos_token=True,
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        padding_side="right",
    )


def reference_ids(tokenizer: Any, texts: list[str], *, max_length: int = 64) -> list[list[int]]:
    """The SigLIP 2 contract the way transformers documents it, special tokens as text."""
    encoded = tokenizer(
        [t.lower() for t in texts],
        padding="max_length",
        max_length=max_length,
        truncation=True,
        split_special_tokens=True,
    )
    return [list(map(int, ids)) for ids in encoded["input_ids"]]


def checkpoints(source: Path, base: Path) -> dict[str, Path]:
    """A checkpoint directory per shape of `SHAPES` under ``base``, one tower written once,
    the tokenizer from ``source``."""
    write_tower(base / "tower")
    return {
        shape: make_checkpoint(source, base / shape, shape=shape, tower=base / "tower")
        for shape in SHAPES
    }
