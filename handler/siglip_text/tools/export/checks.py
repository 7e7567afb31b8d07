"""The checks every export must pass before its manifest is written.

`checkpoint_reference` (PyTorch's side, computed once, before the tower is freed) and
`check_against_checkpoint`: the bundle's token ids against the contract's (built from the
checkpoint's tokenizer.json) and its vectors against PyTorch on the contract's edge cases;
`fp32_fidelity_vectors` then `measure_int8_fidelity`: an int8 graph against the fp32 graph
of the same checkpoint (cosine, top-10 overlap); `probe_reference` and `record_self_check`:
what init holds the bundle to. A miss raises `ExportCheckFailed` (exit status 1). Each
returns the manifest's typed record (bundle.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...engine.bundle import (
    ExportCheck,
    Fidelity,
    Lowercase,
    RankAgreement,
    SelfCheck,
    VectorAgreement,
)
from ...engine.cpu import cpu_description
from ...engine.self_check import MARGIN, cosine_to_reference
from ...engine.service import PROBE_TEXT
from ..exit_status import CheckFailed
from ..parity import compare_vectors, id_mismatches, topk_overlap
from ..texts import EDGE_CASE_TEXTS, MAX_LENGTH, synthetic_captions

if TYPE_CHECKING:
    from ...engine.service import EmbeddingService
    from ...engine.tokenization import SiglipTokenizer

FP32_MIN_COSINE = 0.99999
INT8_MIN_COSINE = 0.99


class ExportCheckFailed(CheckFailed):
    """Raised when the exported bundle does not reproduce the checkpoint closely enough."""


@dataclass(frozen=True)
class CheckpointReference:
    """What the PyTorch tower gives on EDGE_CASE_TEXTS, computed once before the tower is
    freed (the export then holds no PyTorch model beside the ONNX graphs it builds)."""

    texts: tuple[str, ...]
    #: The bundle tokenizer's ids for the texts (the ids both sides are fed).
    ids: np.ndarray
    #: Where those ids depart from the contract's, one line per text (empty: none).
    mismatches: tuple[str, ...]
    #: The tower's pooled output on ``ids``, float32.
    vectors: np.ndarray
    lowercase: Lowercase


def checkpoint_reference(
    tokenizer: SiglipTokenizer,
    tower: Any,
    contract_ids: list[list[int]],
    *,
    lowercase: Lowercase,
) -> CheckpointReference:
    """Tokenizer parity with the contract reference and PyTorch's vectors on EDGE_CASE_TEXTS.

    ``tokenizer`` is the bundle's (as the service loads it). ``contract_ids`` are the
    contract's ids of EDGE_CASE_TEXTS, built from the content ids of the checkpoint's
    tokenizer.json by ``checkpoint.contract_token_ids``, so they do not depend on the
    installed transformers. The vectors are PyTorch's on the bundle's ids, so that a
    tokenizer difference and a graph difference each get their own message in
    `check_against_checkpoint`.
    """
    from .checkpoint import pooled_vectors

    texts = EDGE_CASE_TEXTS
    ours = tokenizer.encode_texts(texts).ids
    mismatches = [
        f"{text[:40]!r}: {reason}"
        for text, reason in id_mismatches(tokenizer, texts, ours.tolist(), contract_ids)
    ]
    return CheckpointReference(
        texts=tuple(texts),
        ids=ours,
        mismatches=tuple(mismatches),
        vectors=pooled_vectors(tower, ours.tolist()),
        lowercase=lowercase,
    )


def check_against_checkpoint(
    service: EmbeddingService, reference: CheckpointReference, *, min_cosine: float | None
) -> ExportCheck:
    """The service's vectors against PyTorch's (`checkpoint_reference`) on EDGE_CASE_TEXTS.

    Raises ExportCheckFailed when the bundle's ids miss the contract's or, with
    ``min_cosine``, when the lowest cosine is below it.
    """
    texts = list(reference.texts)
    ours = service.tokenizer.encode_texts(texts).ids
    if not np.array_equal(ours, reference.ids):
        raise ExportCheckFailed("the served tokenizer's ids differ from the checked tokenizer's")
    vectors = service.embed_texts(texts).vectors
    stats = compare_vectors(vectors, reference.vectors)
    mismatches = reference.mismatches
    if mismatches:
        raise ExportCheckFailed(
            "tokenizer.json does not reproduce the contract's ids (the checkpoint's "
            "tokenizer.json on the lowercased text, special-token strings as text, then <eos> "
            f"and <pad> to {MAX_LENGTH}) on {len(mismatches)} of {len(texts)} texts:\n  "
            + "\n  ".join(mismatches)
        )
    if min_cosine is not None and stats.cosine_min < min_cosine:
        raise ExportCheckFailed(
            f"ONNX graph vs PyTorch: lowest cosine {stats.cosine_min:.7f} on "
            f"{texts[stats.worst_index][:40]!r} is below {min_cosine} (max abs error "
            f"{stats.max_abs_error:.2e})"
        )
    return ExportCheck(
        texts=len(texts),
        tokenizer_mismatches=0,
        tokenizer_reference="the contract's ids: the checkpoint's tokenizer.json (read with "
        f"tokenizers) on the lowercased text ({reference.lowercase}), no special tokens added "
        f"and special-token strings as text, the first {MAX_LENGTH - 1} ids, <eos>, <pad> to "
        f"{MAX_LENGTH}",
        vs_pytorch=VectorAgreement(**stats.as_dict()),
    )


@dataclass(frozen=True)
class Fp32Vectors:
    """The fp32 graph's vectors for the int8 fidelity measure, computed before the int8 graph
    is made (the fp32 session is then closed while quantizing)."""

    corpus_size: int
    queries: int
    query_texts: tuple[str, ...]
    corpus: np.ndarray
    query_vectors: np.ndarray
    edge_cases: np.ndarray


def fp32_fidelity_vectors(fp32: EmbeddingService, *, corpus_size: int, queries: int) -> Fp32Vectors:
    """The synthetic corpus (seed 1), the queries (seed 2) and EDGE_CASE_TEXTS, with fp32."""
    corpus = synthetic_captions(corpus_size, seed=1)
    query_texts = synthetic_captions(queries, seed=2)
    return Fp32Vectors(
        corpus_size=corpus_size,
        queries=queries,
        query_texts=tuple(query_texts),
        corpus=fp32.embed_texts(corpus).vectors,
        query_vectors=fp32.embed_texts(query_texts).vectors,
        edge_cases=fp32.embed_texts(EDGE_CASE_TEXTS).vectors,
    )


def measure_int8_fidelity(
    int8: EmbeddingService, fp32: Fp32Vectors, *, fp32_vs_pytorch: VectorAgreement
) -> Fidelity:
    """int8 against fp32: cosine on EDGE_CASE_TEXTS + queries, top-10 over a synthetic corpus.

    The corpus stands in for an index built with full precision: it is embedded once with
    fp32 (`fp32_fidelity_vectors`), and the queries are ranked against it with fp32 and with
    int8 query vectors. ``fp32_vs_pytorch``: the fp32 graph's own check, recorded beside it.
    """
    corpus, reference = fp32.corpus, fp32.query_vectors
    ours = int8.embed_texts(list(fp32.query_texts)).vectors
    cosine = compare_vectors(
        np.concatenate([int8.embed_texts(EDGE_CASE_TEXTS).vectors, ours]),
        np.concatenate([fp32.edge_cases, reference]),
    )
    overlap = topk_overlap(ours, reference, corpus, k=10)
    spread = corpus @ corpus.T
    off_diagonal = spread[~np.eye(len(corpus), dtype=bool)]
    return Fidelity(
        reference="fp32 export of the same checkpoint",
        cosine=VectorAgreement(**cosine.as_dict()),
        top10_overlap=RankAgreement(**overlap.as_dict()),
        corpus=f"{fp32.corpus_size} synthetic captions (seed 1), {fp32.queries} queries (seed 2)",
        corpus_mean_pairwise_cosine=round(float(off_diagonal.mean()), 6),
        fp32_vs_pytorch=fp32_vs_pytorch,
    )


def probe_reference(fp32: EmbeddingService) -> np.ndarray:
    """The fp32 graph's vector of the init probe's text (`record_self_check`'s reference),
    taken while the fp32 session is open: export closes it before it quantizes."""
    vector: np.ndarray = fp32.embed_texts([PROBE_TEXT]).vectors[0].astype(np.float64)
    return vector


def record_self_check(served: EmbeddingService, reference: np.ndarray) -> SelfCheck:
    """The manifest's ``self_check``: the fp32 graph's vector of the init probe's text
    (`probe_reference`), and the bound init holds this bundle to (its cosine here less
    `self_check.MARGIN`)."""
    recorded = [round(float(x), 8) for x in reference]
    # The figure init computes (self_check.check_reference), from the reference as recorded.
    cosine = cosine_to_reference(
        served.embed_texts([PROBE_TEXT]).vectors[0], np.asarray(recorded, dtype=np.float64)
    )
    return SelfCheck(
        text=PROBE_TEXT,
        reference=recorded,
        min_cosine=round(min(cosine, 1.0) - MARGIN, 6),
        measured_cosine=round(cosine, 7),
        measured_on=cpu_description(),
    )
