"""The contract document (docs/contract.md) as the tests write it out by hand, independent of
engine/contract.py: the rules every SigLIP 2 text vector follows, and the values of one
model."""

from __future__ import annotations

from typing import Any

#: docs/contract.md's fixed values: the same in every SigLIP 2 contract.
SIGLIP2_RULES: dict[str, Any] = {
    "format": "siglip-text-contract/1",
    "special_token_strings": "text",
    "bos": "none",
    "eos": "sticky",
    "padding": "right",
    "attention_mask": "none",
    "pooling": "last-position",
    "head": "linear",
    "normalization": "l2",
}


def contract_document(**values: Any) -> dict[str, Any]:
    """The contract document of one model: the rules, then ``values`` (repository, revision,
    tokenizer, lowercase, eos_id, pad_id, length, dimension, weights, weights_of)."""
    return {**SIGLIP2_RULES, **values}
