"""Reference records as a GPU pipeline that calls the checkpoint tokenizer directly writes them.

``siglip-text reference`` writes the contract's ids (content ids, then ``<eos>`` and pads);
a pipeline that calls ``tokenizer(text, padding="max_length", max_length=64,
truncation=True)`` gets whatever post-processing, pad token and padding side the tokenizer
has, which is how a wrong index is made. The tests use these to check that ``verify``
names each mistake.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def pipeline_reference(
    tower: Any, tokenizer: Any, texts: Sequence[str], *, lowercase: str = "unicode"
) -> list[dict[str, Any]]:
    """``{text, input_ids, embedding}`` from the tokenizer called directly, and the tower."""
    from siglip_text.tools.export.checkpoint import direct_call_token_ids, pooled_vectors
    from siglip_text.tools.parity import unit_rows

    ids = direct_call_token_ids(tokenizer, texts, lowercase=lowercase, max_length=64)  # type: ignore[arg-type]
    vectors = unit_rows(pooled_vectors(tower, ids))
    return [
        {"text": text, "input_ids": row, "embedding": [float(x) for x in vec.astype(np.float32)]}
        for text, row, vec in zip(texts, ids, vectors, strict=True)
    ]
