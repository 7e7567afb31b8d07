"""The checks every export must pass before its manifest is written.

`check_against_checkpoint`: the bundle's token ids against transformers' and its vectors
against PyTorch on the contract's edge cases; `measure_int8_fidelity`: an int8 graph against
the fp32 graph of the same checkpoint (cosine, top-10 overlap). A miss raises
`ExportCheckFailed` (exit status 1).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from ...bundle import Lowercase
from ..errors import CheckFailed
from ..parity import compare_vectors, explain_id_mismatch, topk_overlap
from ..texts import EDGE_CASE_TEXTS, synthetic_captions

if TYPE_CHECKING:
    from ...service import EmbeddingService

MAX_LENGTH = 64
FP32_MIN_COSINE = 0.99999
INT8_MIN_COSINE = 0.99


class ExportCheckFailed(CheckFailed):
    """Raised when the exported bundle does not reproduce the checkpoint closely enough."""


def _log(message: str) -> None:
    print(f"[export] {message}", file=sys.stderr, flush=True)


def check_against_checkpoint(
    service: EmbeddingService, checkpoint: Any, *, lowercase: Lowercase, min_cosine: float | None
) -> dict[str, Any]:
    """Tokenizer parity with transformers and vectors against PyTorch on EDGE_CASE_TEXTS.

    The vectors are compared on the same ids (ours), so a tokenizer difference and a graph
    difference each get their own message. Raises ExportCheckFailed when either misses.
    """
    from .checkpoint import pooled_vectors, reference_token_ids

    texts = EDGE_CASE_TEXTS
    ours = service.tokenizer.encode_texts(texts).ids
    theirs = reference_token_ids(
        checkpoint.tokenizer, texts, lowercase=lowercase, max_length=MAX_LENGTH
    )
    mismatches = []
    for text, mine, ref in zip(texts, ours.tolist(), theirs, strict=True):
        if mine != ref:
            reason = explain_id_mismatch(
                mine,
                ref,
                pad_id=service.tokenizer.pad_id,
                eos_id=service.tokenizer.eos_id,
                bos_id=checkpoint.tokenizer.convert_tokens_to_ids("<bos>"),
            )
            mismatches.append(f"{text[:40]!r}: {reason}")
    vectors = service.embed_texts(texts).vectors
    expected = pooled_vectors(checkpoint.tower, ours.tolist())
    stats = compare_vectors(vectors, expected)
    _log(
        f"vs PyTorch on {stats.count} texts: cosine min {stats.cosine_min:.7f} mean "
        f"{stats.cosine_mean:.7f}, max abs error {stats.max_abs_error:.2e}; tokenizer "
        f"mismatches {len(mismatches)}"
    )
    if mismatches:
        raise ExportCheckFailed(
            "tokenizer.json does not reproduce the checkpoint tokenizer (called with "
            f"lowercased text, padding='max_length', max_length={MAX_LENGTH}) on "
            f"{len(mismatches)} of {len(texts)} texts:\n  " + "\n  ".join(mismatches)
        )
    if min_cosine is not None and stats.cosine_min < min_cosine:
        raise ExportCheckFailed(
            f"ONNX graph vs PyTorch: lowest cosine {stats.cosine_min:.7f} on "
            f"{texts[stats.worst_index][:40]!r} is below {min_cosine} (max abs error "
            f"{stats.max_abs_error:.2e})"
        )
    return {
        "texts": len(texts),
        "tokenizer_mismatches": 0,
        "tokenizer_reference": "transformers AutoTokenizer, padding='max_length', "
        f"max_length={MAX_LENGTH}, truncation=True, text lowercased ({lowercase})",
        "vs_pytorch": stats.as_dict(),
    }


def measure_int8_fidelity(
    int8: EmbeddingService, fp32: EmbeddingService, *, corpus_size: int, queries: int
) -> dict[str, Any]:
    """int8 against fp32: cosine on EDGE_CASE_TEXTS + queries, top-10 over a synthetic corpus.

    The corpus stands in for an index built with full precision: it is embedded once with
    fp32, and the queries are ranked against it with fp32 and with int8 query vectors.
    """
    corpus_texts = synthetic_captions(corpus_size, seed=1)
    query_texts = synthetic_captions(queries, seed=2)
    corpus = fp32.embed_texts(corpus_texts).vectors
    reference = fp32.embed_texts(query_texts).vectors
    ours = int8.embed_texts(query_texts).vectors
    check_texts = fp32.embed_texts(EDGE_CASE_TEXTS).vectors
    cosine = compare_vectors(
        np.concatenate([int8.embed_texts(EDGE_CASE_TEXTS).vectors, ours]),
        np.concatenate([check_texts, reference]),
    )
    overlap = topk_overlap(ours, reference, corpus, k=10)
    spread = corpus @ corpus.T
    off_diagonal = spread[~np.eye(len(corpus), dtype=bool)]
    return {
        "reference": "fp32 export of the same checkpoint",
        "cosine": cosine.as_dict(),
        "top10_overlap": overlap.as_dict(),
        "corpus": f"{corpus_size} synthetic captions (seed 1), {queries} queries (seed 2)",
        "corpus_mean_pairwise_cosine": round(float(off_diagonal.mean()), 6),
    }
