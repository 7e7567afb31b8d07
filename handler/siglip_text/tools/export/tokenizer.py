"""Writes the SigLIP 2 contract into a ``tokenizers.Tokenizer`` (export, and so the demo).

Kept free of torch and transformers: it needs only ``tokenizers``.
"""

from __future__ import annotations

from typing import Any

from tokenizers import Tokenizer, normalizers, processors

from ...engine.bundle import Lowercase
from ..exit_status import ToolError
from ..lowercase import lowercase_normalizer


def apply_contract(tokenizer: Tokenizer, *, lowercase: Lowercase, max_length: int) -> Tokenizer:
    """Lowercasing before the checkpoint's own normalizer; ``$A <eos>``; pad/truncate to L.

    The serving code ignores the stored padding, truncation and post-processor and applies
    the rule itself; they are written so that other consumers of this ``tokenizer.json``
    (for example ``PreTrainedTokenizerFast``) produce the same ids.
    """
    steps = []
    lower = lowercase_normalizer(lowercase)
    if lower is not None:
        steps.append(lower)
    if tokenizer.normalizer is not None:
        steps.append(tokenizer.normalizer)
    tokenizer.normalizer = normalizers.Sequence(steps) if steps else None
    eos_id, pad_id = contract_tokens(tokenizer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A <eos>", pair="$A $B <eos>", special_tokens=[("<eos>", eos_id)]
    )
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(direction="right", pad_id=pad_id, pad_token="<pad>", length=max_length)
    return tokenizer


def contract_tokens(tokenizer: Tokenizer) -> tuple[int, int]:
    """The ids of ``<eos>`` and ``<pad>``; a ValueError naming whichever is missing."""
    eos_id = tokenizer.token_to_id("<eos>")
    pad_id = tokenizer.token_to_id("<pad>")
    if eos_id is None or pad_id is None:
        missing = [name for name, tid in (("<eos>", eos_id), ("<pad>", pad_id)) if tid is None]
        raise ValueError(
            f"the tokenizer has no {' and no '.join(missing)} token: the SigLIP 2 contract ends "
            "every text with <eos> and pads with <pad> (it is not a SigLIP 2 tokenizer)"
        )
    return eos_id, pad_id


def check_vocabulary(tokenizer: Any, *, rows: int) -> None:
    """Every id of the tokenizer must have a row in the graph's token embedding table.

    Otherwise the bundle would fail on the first text that produces such an id, with an
    ONNX Runtime status that names neither; this names both sizes and the extra tokens.
    """
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    if size <= rows:
        return
    by_id = {i: t for t, i in tokenizer.get_vocab(with_added_tokens=True).items() if i >= rows}
    extra = [f"{i} {by_id[i]!r}" for i in sorted(by_id)]
    shown = ", ".join(extra[:8]) + (f", ... ({len(extra)} in all)" if len(extra) > 8 else "")
    raise ToolError(
        f"the tokenizer has {size:,} entries but the text tower's token embedding table has "
        f"{rows:,} rows: {len(extra)} token(s) have no row and cannot be embedded ({shown}). "
        "The tokenizer does not belong to this checkpoint, or something added tokens to it; "
        "export the checkpoint's own tokenizer.json"
    )
