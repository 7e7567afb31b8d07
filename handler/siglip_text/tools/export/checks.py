"""The checks every export must pass before its manifest is written.

`checkpoint_reference` (PyTorch's side, computed once, before the tower is freed) and
`check_against_checkpoint`: the bundle's token ids against the contract's (built from the
checkpoint's tokenizer.json) and its vectors against PyTorch on the contract's edge cases;
`describe_checkpoint_tokenizer`: what the installed transformers makes of the checkpoint
tokenizer, where it differs from the contract (recorded, never a failure);
`fp32_fidelity_vectors` then `measure_int8_fidelity`: an int8 graph against the fp32 graph
of the same checkpoint (cosine, top-10 overlap). A miss raises `ExportCheckFailed` (exit status 1).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...bundle import Lowercase, SelfCheck
from ...cpu import cpu_description
from ...self_check import MARGIN, cosine_to_reference
from ...service import PROBE_TEXT
from ..errors import CheckFailed
from ..parity import compare_vectors, explain_id_mismatch, topk_overlap
from ..texts import EDGE_CASE_TEXTS, SPECIAL_TOKEN_STRINGS, synthetic_captions

if TYPE_CHECKING:
    from ...service import EmbeddingService
    from ...tokenization import SiglipTokenizer

MAX_LENGTH = 64
FP32_MIN_COSINE = 0.99999
INT8_MIN_COSINE = 0.99


class ExportCheckFailed(CheckFailed):
    """Raised when the exported bundle does not reproduce the checkpoint closely enough."""


def _log(message: str) -> None:
    print(f"[export] {message}", file=sys.stderr, flush=True)


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
    tokenizer: SiglipTokenizer, checkpoint: Any, *, lowercase: Lowercase, reference: Any = None
) -> CheckpointReference:
    """Tokenizer parity with the contract reference and PyTorch's vectors on EDGE_CASE_TEXTS.

    ``tokenizer`` is the bundle's (as the service loads it). The reference ids are the
    contract's, built from the content ids of the checkpoint's tokenizer.json
    (``reference``, default ``file_tokenizer(checkpoint)``) by ``contract_token_ids``, so
    they do not depend on the installed transformers. The vectors are PyTorch's on the
    bundle's ids, so that a tokenizer difference and a graph difference each get their own
    message in `check_against_checkpoint`.
    """
    from .checkpoint import contract_token_ids, file_tokenizer, pooled_vectors

    texts = EDGE_CASE_TEXTS
    ours = tokenizer.encode_texts(texts).ids
    if reference is None:
        reference = file_tokenizer(checkpoint)
    theirs = contract_token_ids(reference, texts, lowercase=lowercase, max_length=MAX_LENGTH)
    mismatches = []
    for text, mine, ref in zip(texts, ours.tolist(), theirs, strict=True):
        if mine != ref:
            reason = explain_id_mismatch(
                mine,
                ref,
                pad_id=tokenizer.pad_id,
                eos_id=tokenizer.eos_id,
                bos_id=tokenizer.bos_id,
            )
            mismatches.append(f"{text[:40]!r}: {reason}")
    return CheckpointReference(
        texts=tuple(texts),
        ids=ours,
        mismatches=tuple(mismatches),
        vectors=pooled_vectors(checkpoint.tower, ours.tolist()),
        lowercase=lowercase,
    )


def check_against_checkpoint(
    service: EmbeddingService, reference: CheckpointReference, *, min_cosine: float | None
) -> dict[str, Any]:
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
    _log(
        f"vs PyTorch on {stats.count} texts: cosine min {stats.cosine_min:.7f} mean "
        f"{stats.cosine_mean:.7f}, max abs error {stats.max_abs_error:.2e}; tokenizer "
        f"mismatches {len(mismatches)}"
    )
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
    return {
        "texts": len(texts),
        "tokenizer_mismatches": 0,
        "tokenizer_reference": "the contract's ids: the checkpoint's tokenizer.json (read with "
        f"tokenizers) on the lowercased text ({reference.lowercase}), no special tokens added "
        f"and special-token strings as text, the first {MAX_LENGTH - 1} ids, <eos>, <pad> to "
        f"{MAX_LENGTH}",
        "vs_pytorch": stats.as_dict(),
    }


def describe_checkpoint_tokenizer(
    checkpoint: Any, *, lowercase: Lowercase, reference: Any = None
) -> dict[str, Any]:
    """What the checkpoint tokenizer does as the installed transformers loads it.

    A GPU pipeline that calls it directly, as transformers documents SigLIP 2
    (``tokenizer(text, padding="max_length", max_length=64, truncation=True)``), gets the
    tokenizer's own post-processing, which transformers 4 rebuilt from
    ``add_bos_token``/``add_eos_token`` and transformers 5 takes from ``tokenizer.json``;
    transformers may also build the tokenizer otherwise than the file says (transformers 5
    loads a SigLIP 2 checkpoint's as ``Siglip2Tokenizer``, which lowercases), and Hugging
    Face tokenizers match special-token strings in the text unless
    ``split_special_tokens=True``. Each is compared with the contract (from ``reference``,
    the checkpoint's tokenizer.json) on EDGE_CASE_TEXTS; ``note``, present only when the
    first two differ, says how a GPU pipeline calling it would depart from the contract.
    """
    import transformers

    from .checkpoint import contract_token_ids, direct_call_token_ids, file_tokenizer

    tokenizer = checkpoint.tokenizer
    version = transformers.__version__
    if reference is None:
        reference = file_tokenizer(checkpoint)
    contract = contract_token_ids(
        reference, EDGE_CASE_TEXTS, lowercase=lowercase, max_length=MAX_LENGTH
    )
    eos, pad = contract[EDGE_CASE_TEXTS.index("")][:2]
    bos = reference.token_to_id("<bos>")

    def decode(ids: list[int]) -> str:
        return str(reference.decode(ids, skip_special_tokens=False))

    def differences(theirs: list[list[int]], ours: list[list[int]]) -> dict[str, int]:
        """Each distinct reason (explain_id_mismatch) and on how many texts it shows."""
        found: dict[str, int] = {}
        for mine, ref in zip(ours, theirs, strict=True):
            if mine != ref:
                why = explain_id_mismatch(
                    mine, ref, pad_id=pad, eos_id=eos, bos_id=bos, decode=decode
                )
                # positions and ids are for a text at a time; here only the kind counts
                reason = "; ".join(
                    "other ids for the text" if part.startswith("ids differ from") else part
                    for part in why.split("; ")
                )
                found[reason] = found.get(reason, 0) + 1
        return found

    # transformers' own ids for the text (nothing added) against tokenizer.json's
    theirs = contract_token_ids(
        tokenizer, EDGE_CASE_TEXTS, lowercase=lowercase, max_length=MAX_LENGTH
    )
    content = differences(theirs, contract)
    # its post-processing and padding, on top of its own ids for the text
    reasons = differences(
        direct_call_token_ids(
            tokenizer, EDGE_CASE_TEXTS, lowercase=lowercase, max_length=MAX_LENGTH
        ),
        theirs,
    )
    special = [
        i for i, t in enumerate(EDGE_CASE_TEXTS) if any(s in t for s in SPECIAL_TOKEN_STRINGS)
    ]
    unsplit = direct_call_token_ids(
        tokenizer,
        [EDGE_CASE_TEXTS[i] for i in special],
        lowercase=lowercase,
        max_length=MAX_LENGTH,
        split_special_tokens=False,
    )
    split = direct_call_token_ids(
        tokenizer, [EDGE_CASE_TEXTS[i] for i in special], lowercase=lowercase, max_length=MAX_LENGTH
    )
    total = len(EDGE_CASE_TEXTS)
    record: dict[str, Any] = {
        "transformers": version,
        "class": type(tokenizer).__name__,
        "call": f"tokenizer(text.lower(), padding='max_length', max_length={MAX_LENGTH}, "
        "truncation=True)",
        "post_processing": (
            "; ".join(f"{r} ({n} of {total} texts)" for r, n in reasons.items())
            if reasons
            else "follows the contract (no <bos>, <eos> appended, <pad> on the right)"
        ),
        "content_ids": (
            "; ".join(f"{r} ({n} of {total} texts)" for r, n in content.items())
            if content
            else "equal to tokenizer.json's"
        ),
        "special_token_strings": (
            "matched as control tokens unless split_special_tokens=True"
            if unsplit != split
            else "text"
        ),
    }
    notes = []
    if reasons:
        notes.append(
            f"transformers {version} loads this tokenizer {_post_processing_phrase(reasons)}: a "
            "GPU pipeline that calls it directly does not follow the SigLIP 2 contract (this "
            "bundle does; build that pipeline's ids with add_special_tokens=False, then <eos> "
            "and <pad>, or give the checkpoint a tokenizer.json whose post-processor is "
            "'$A <eos>')"
        )
    if content:
        notes.append(
            f"transformers {version} loads this tokenizer as {type(tokenizer).__name__}, whose "
            f"ids for the text itself differ from tokenizer.json's on {sum(content.values())} "
            f"of {total} texts ({'; '.join(content)}); this bundle follows tokenizer.json"
        )
    if notes:
        record["note"] = ". ".join(notes)
    return record


def _post_processing_phrase(reasons: dict[str, int]) -> str:
    """``with a leading <bos> and no <eos>`` from explain_id_mismatch's reasons."""
    parts = {part for reason in reasons for part in reason.split("; ")}
    phrases = []
    if any(p.startswith("adds <bos>") for p in parts):
        phrases.append("a leading <bos>")
    if "no <eos> appended" in parts:
        phrases.append("no <eos>")
    elif any(p.startswith("drops <eos>") for p in parts):
        phrases.append("an <eos> that truncation drops")
    rest = [
        p
        for p in sorted(parts)
        if not p.startswith(("adds <bos>", "drops <eos>")) and p != "no <eos> appended"
    ]
    if phrases:
        text = "with " + " and ".join(phrases)
        return text + (f" ({'; '.join(rest)})" if rest else "")
    return "so that " + "; ".join(rest)


@dataclass(frozen=True)
class Fp32Vectors:
    """The fp32 graph's vectors for the int8 fidelity measure, computed before the int8 graph
    is made (the fp32 session is then closed while quantizing)."""

    corpus_size: int
    queries: int
    corpus: np.ndarray
    query_vectors: np.ndarray
    edge_cases: np.ndarray


def fp32_fidelity_vectors(fp32: EmbeddingService, *, corpus_size: int, queries: int) -> Fp32Vectors:
    """The synthetic corpus (seed 1), the queries (seed 2) and EDGE_CASE_TEXTS, with fp32."""
    return Fp32Vectors(
        corpus_size=corpus_size,
        queries=queries,
        corpus=fp32.embed_texts(synthetic_captions(corpus_size, seed=1)).vectors,
        query_vectors=fp32.embed_texts(synthetic_captions(queries, seed=2)).vectors,
        edge_cases=fp32.embed_texts(EDGE_CASE_TEXTS).vectors,
    )


def measure_int8_fidelity(int8: EmbeddingService, fp32: Fp32Vectors) -> dict[str, Any]:
    """int8 against fp32: cosine on EDGE_CASE_TEXTS + queries, top-10 over a synthetic corpus.

    The corpus stands in for an index built with full precision: it is embedded once with
    fp32 (`fp32_fidelity_vectors`), and the queries are ranked against it with fp32 and with
    int8 query vectors.
    """
    corpus, reference = fp32.corpus, fp32.query_vectors
    ours = int8.embed_texts(synthetic_captions(fp32.queries, seed=2)).vectors
    cosine = compare_vectors(
        np.concatenate([int8.embed_texts(EDGE_CASE_TEXTS).vectors, ours]),
        np.concatenate([fp32.edge_cases, reference]),
    )
    overlap = topk_overlap(ours, reference, corpus, k=10)
    spread = corpus @ corpus.T
    off_diagonal = spread[~np.eye(len(corpus), dtype=bool)]
    return {
        "reference": "fp32 export of the same checkpoint",
        "cosine": cosine.as_dict(),
        "top10_overlap": overlap.as_dict(),
        "corpus": f"{fp32.corpus_size} synthetic captions (seed 1), {fp32.queries} queries "
        "(seed 2)",
        "corpus_mean_pairwise_cosine": round(float(off_diagonal.mean()), 6),
    }


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
