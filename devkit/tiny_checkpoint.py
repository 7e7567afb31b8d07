"""A tiny random-weight SigLIP checkpoint, written like a Hub download (export extra).

The real architecture (``SiglipModel``: text and image towers, logit scale and bias) at toy
size, and the demo's Gemma-style BPE tokenizer with its lowercasing removed, as a Hub
tokenizer has none: ``siglip-text export`` must write it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from siglip_text.settings import demo_model_dir

SEED = 20261201
REVISION = "0123456789abcdef0123456789abcdef01234567"
REPOSITORY = "test/siglip-tiny-random"


def perturbed(model: Any) -> Any:
    """Random init leaves LayerNorms at identity and biases at zero: perturb everything."""
    import torch

    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return model


def checkpoint_tokenizer() -> Any:
    """The demo tokenizer as a checkpoint would ship it: no lowercasing, EOS appended."""
    from tokenizers import Tokenizer, normalizers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer.from_file(str(demo_model_dir() / "tokenizer.json"))
    tokenizer.normalizer = normalizers.Replace(" ", "▁")
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tokenizer,
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
    )


def make_tiny_checkpoint(
    directory: Path, *, hidden: int = 32, projection: int | None = None
) -> Path:
    """save_pretrained of a seeded random SiglipModel and its tokenizer into ``directory``.

    ``projection``: the text head's output width (transformers' ``projection_size``; the
    hidden size when None). giant-opt's head is wider than its tower (1536 over 1152).
    """
    import torch
    from transformers import SiglipConfig, SiglipModel

    tokenizer = checkpoint_tokenizer()
    torch.manual_seed(SEED)
    config = SiglipConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": hidden,
            "intermediate_size": 2 * hidden,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "max_position_embeddings": 64,
            "projection_size": projection or hidden,
            "pad_token_id": 0,
            "eos_token_id": 1,
            "bos_token_id": 2,
        },
        vision_config={
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 16,
        },
    )
    model = perturbed(SiglipModel(config).eval())  # type: ignore[no-untyped-call]
    with torch.no_grad():
        model.logit_scale.fill_(math.log(10.0))
        model.logit_bias.fill_(-10.0)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def export_tiny(checkpoint: Path, out: Path, *extra: str) -> int:
    """``siglip-text export`` of the tiny checkpoint (one thread, a small fidelity corpus),
    fp32 unless ``extra`` says ``--precision int8`` (export's own default is int8); returns
    the exit status."""
    from siglip_text.cli import main

    return main([*export_argv(checkpoint, out), "--precision", "fp32", *extra])


def export_argv(
    checkpoint: Path, out: Path, *, repository: str = REPOSITORY, revision: str = REVISION
) -> list[str]:
    """``export CHECKPOINT --out OUT`` with the repository and revision it records, one
    thread and a small fidelity corpus: the arguments the fixtures give ``siglip-text``."""
    return [
        "export",
        str(checkpoint),
        "--out",
        str(out),
        "--repository",
        repository,
        "--revision",
        revision,
        "--threads",
        "1",
        "--fidelity-corpus",
        "128",
    ]
