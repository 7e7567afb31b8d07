"""Parity measures shared by export, verify and zero-shot: numpy only.

Vector fidelity (cosine, largest component error), top-k retrieval overlap, and a reader of
token-id mismatches that names the known ways a reference pipeline departs from the
contract (pad id, padding side, lowercasing, BOS, EOS, length).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..engine.tokenization import SiglipTokenizer
from .lowercase import ascii_lower


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, in float64 (a zero row stays zero)."""
    rows = np.asarray(matrix, dtype=np.float64)
    if rows.ndim != 2:
        raise ValueError(f"expected a matrix, got shape {rows.shape}")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: np.ndarray = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
    return unit


@dataclass(frozen=True)
class VectorStats:
    """How close two sets of vectors are, row by row, after L2 normalization."""

    count: int
    cosine_min: float
    cosine_mean: float
    cosine_p01: float
    max_abs_error: float
    worst_index: int

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 8) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def compare_vectors(ours: np.ndarray, reference: np.ndarray) -> VectorStats:
    """Cosine per row (min, mean, 1st percentile) and the largest component difference."""
    a, b = unit_rows(ours), unit_rows(reference)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    if a.shape[0] == 0:
        raise ValueError("no vectors to compare")
    cosine = np.einsum("ij,ij->i", a, b)
    return VectorStats(
        count=int(a.shape[0]),
        cosine_min=float(cosine.min()),
        cosine_mean=float(cosine.mean()),
        cosine_p01=float(np.percentile(cosine, 1)),
        max_abs_error=float(np.abs(a - b).max()),
        worst_index=int(cosine.argmin()),
    )


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores of each row, best first (ties: lower index first)."""
    k = min(k, scores.shape[1])
    order = np.argsort(-scores, axis=1, kind="stable")
    return order[:, :k]


@dataclass(frozen=True)
class OverlapStats:
    """Top-k retrieval agreement: the share of the reference's top k that ours also returns."""

    k: int
    queries: int
    corpus: int
    mean: float
    min: float
    top1_agreement: float

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def topk_overlap(
    ours: np.ndarray, reference: np.ndarray, corpus: np.ndarray, *, k: int = 10
) -> OverlapStats:
    """Rank ``corpus`` by cosine to each query, with our vectors and the reference's."""
    items = unit_rows(corpus)
    mine = top_k(unit_rows(ours) @ items.T, k)
    theirs = top_k(unit_rows(reference) @ items.T, k)
    width = mine.shape[1]
    shared = np.array(
        [len(set(a.tolist()) & set(b.tolist())) / width for a, b in zip(mine, theirs, strict=True)]
    )
    return OverlapStats(
        k=width,
        queries=int(mine.shape[0]),
        corpus=int(items.shape[0]),
        mean=float(shared.mean()),
        min=float(shared.min()),
        top1_agreement=float((mine[:, 0] == theirs[:, 0]).mean()),
    )


def explain_id_mismatch(
    ours: Sequence[int],
    reference: Sequence[int],
    *,
    pad_id: int,
    eos_id: int,
    bos_id: int | None = None,
    decode: Callable[[list[int]], str] | None = None,
) -> str:
    """Why ``reference`` differs from ``ours`` (the contract's ids for the same text).

    Names the known failure modes (docs/contract.md): padding to the longest text, left padding,
    padding with another id (SigLIP 1 used 1), a BOS, a missing or non-sticky EOS, no
    lowercasing or ASCII-only lowercasing; else the first differing position.
    """
    ours, ref = list(ours), list(reference)
    length = len(ours)
    if len(ref) != length:
        return (
            f"reference has {len(ref)} ids, not {length} (padded to the longest text or not "
            f"padded: the contract pads every text to {length})"
        )
    reasons: list[str] = []
    padded = _trailing_run(ours, pad_id) > 0
    if padded and ref[-1] == eos_id and ref[0] in (pad_id, eos_id) and ref[0] != ours[0]:
        value = ref[0]
        run = _leading_run(ref, value)
        ref = ref[run:] + [value] * run
        reasons.append(
            "left padding (the contract pads on the right; pooling reads the last position)"
        )
    value = ref[-1]
    run = _trailing_run(ref, value)
    if padded and value != pad_id and (run >= 2 or value != eos_id):
        named = " = <eos>, as SigLIP 1 pipelines do" if value == eos_id else ""
        reasons.append(f"pads with id {value}{named}, not <pad> = {pad_id}")
        if value == eos_id:
            ref = ref[: length - run] + [eos_id] + [pad_id] * (run - 1)
        else:
            ref = ref[: length - run] + [pad_id] * run
    if bos_id is not None and ref and ref[0] == bos_id and ours[0] != bos_id:
        reasons.append("adds <bos> (the contract has none)")
        ref = ref[1:] + [pad_id]
    if ref == ours:
        return "; ".join(reasons)
    our_content, ref_content = _content(ours, pad_id, eos_id), _content(ref, pad_id, eos_id)
    if eos_id in ours and eos_id not in ref:
        full = _trailing_run(ref, pad_id) == 0
        reasons.append(
            "drops <eos> when truncating (the contract keeps it: sticky EOS)"
            if full and not _trailing_run(ours, pad_id)
            else "no <eos> appended"
        )
        if ref_content[: len(our_content)] == our_content:
            return "; ".join(reasons)
    if decode is not None and ref_content != our_content:
        case = _case_reason(decode(our_content), decode(ref_content))
        if case:
            reasons.append(case)
            return "; ".join(reasons)
    position = next((i for i, (a, b) in enumerate(zip(ours, ref, strict=True)) if a != b), length)
    reasons.append(
        f"ids differ from position {position}: contract {ours[position : position + 4]}..., "
        f"reference {ref[position : position + 4]}..."
    )
    return "; ".join(reasons)


def id_mismatches(
    tokenizer: SiglipTokenizer,
    texts: Sequence[str],
    ours: Sequence[Sequence[int]],
    expected: Sequence[Sequence[int]],
    *,
    decode: bool = False,
) -> list[tuple[str, str]]:
    """Each text whose ids (``ours``, the bundle's ``tokenizer``'s) differ from the
    ``expected`` ones, with `explain_id_mismatch`'s reason (quoting the tokens, ``decode``)."""
    found = []
    for text, mine, ref in zip(texts, ours, expected, strict=True):
        if list(mine) != list(ref):
            reason = explain_id_mismatch(
                mine,
                ref,
                pad_id=tokenizer.pad_id,
                eos_id=tokenizer.eos_id,
                bos_id=tokenizer.bos_id,
                decode=tokenizer.decode if decode else None,
            )
            found.append((text, reason))
    return found


def _leading_run(ids: list[int], value: int) -> int:
    count = 0
    for item in ids:
        if item != value:
            break
        count += 1
    return count


def _trailing_run(ids: list[int], value: int) -> int:
    count = 0
    for item in reversed(ids):
        if item != value:
            break
        count += 1
    return count


def _content(ids: list[int], pad_id: int, eos_id: int) -> list[int]:
    """The ids before the first EOS (or before the padding)."""
    end = len(ids) - _trailing_run(ids, pad_id)
    body = ids[:end]
    if eos_id in body:
        body = body[: body.index(eos_id)]
    return body


def _case_reason(ours: str, ref: str) -> str | None:
    if ours == ref or ours.lower() != ref.lower():
        return None
    ref_has_upper = ref != ref.lower()
    ours_has_upper = ours != ours.lower()
    if ref_has_upper and not ours_has_upper:
        if ascii_lower(ref) == ref:
            return (
                "reference keeps non-ASCII capitals: it lowercases ASCII only (as big_vision's "
                "tf.strings.lower) or not at all; this bundle lowercases all letters (if your "
                "pipeline lowercases ASCII only, export with --lowercase ascii)"
            )
        return "reference text was not lowercased (the checkpoints were trained on lowercased text)"
    if ours_has_upper and not ref_has_upper:
        return (
            "reference lowercases letters that this bundle keeps: export with --lowercase unicode"
        )
    return "letter case differs between the reference and this bundle's lowercasing"
