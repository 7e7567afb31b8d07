"""The checks of ``siglip-text verify``: files, token ids, vectors and retrieval.

See command.py for what each checks; every check returns a `Check` row (report.py renders
them). A bundle in process is checked exactly (its own ids, its files' sha256); an endpoint
through what it answers. Empty texts are checked like any other: the contract embeds
them (``<eos>`` then pads), and so does this project's endpoint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...engine.bundle import BundlePaths, Manifest, sha256_file
from ..backends import Embedder, embed_in_batches, progress_bar
from ..exit_status import ToolError
from ..files import read_jsonl
from ..parity import compare_vectors, id_mismatches, topk_overlap

#: Below this cosine, an endpoint's vectors for a text and for the reference ids are taken
#: to come from different ids (the same ids give the same vector up to float rounding).
SAME_IDS_COSINE = 0.99999


@dataclass
class Check:
    """One row of the report."""

    name: str
    result: str
    threshold: str = ""
    passed: bool = True
    details: list[str] = field(default_factory=list)
    cause: str | None = None  # the likely cause of the details, when one is known

    @property
    def status(self) -> str:
        return "PASS" if self.passed else "FAIL"


@dataclass
class References:
    token_texts: list[str] = field(default_factory=list)
    token_ids: list[list[int]] = field(default_factory=list)
    vector_texts: list[str] = field(default_factory=list)
    vectors: list[list[float]] = field(default_factory=list)


def load_references(paths: list[Path]) -> References:
    """Read every file; each record has ``text`` and ``input_ids`` and/or ``embedding``."""
    refs = References()
    for path in paths:
        for number, record in enumerate(read_jsonl(path), start=1):
            where = f"{path} record {number}"
            text = record.get("text")
            if not isinstance(text, str):
                raise ToolError(f"{where}: no string 'text'")
            ids, vector = record.get("input_ids"), record.get("embedding")
            if ids is None and vector is None:
                raise ToolError(f"{where}: neither 'input_ids' nor 'embedding'")
            if ids is not None:
                if not isinstance(ids, list) or not all(
                    isinstance(i, int) and not isinstance(i, bool) for i in ids
                ):
                    raise ToolError(f"{where}: 'input_ids' must be a list of integers")
                refs.token_texts.append(text)
                refs.token_ids.append(ids)
            if vector is not None:
                if not isinstance(vector, list) or not vector:
                    raise ToolError(f"{where}: 'embedding' must be a list of numbers")
                refs.vector_texts.append(text)
                refs.vectors.append(vector)
    if not refs.token_texts and not refs.vector_texts:
        raise ToolError("the reference files hold no records")
    return refs


def verify(
    embedder: Embedder,
    refs: References,
    *,
    images: np.ndarray | None = None,
    top_k: int = 10,
    min_cosine: float = 0.999,
    min_overlap: float = 0.9,
    max_token_mismatches: int = 0,
    batch_size: int = 64,
    progress: bool = False,
) -> list[Check]:
    """Run every check the references allow; see the module docstring."""
    checks: list[Check] = []
    if embedder.bundle is not None and embedder.manifest is not None:
        checks.append(check_files(embedder.bundle, embedder.manifest))
    if refs.token_texts:
        checks.append(
            check_tokens(
                embedder,
                refs,
                max_mismatches=max_token_mismatches,
                batch_size=batch_size,
                progress=progress,
            )
        )
    if refs.vector_texts:
        reference = np.asarray(refs.vectors, dtype=np.float64)
        if reference.ndim != 2 or reference.shape[1] != embedder.dimension:
            raise ToolError(
                f"reference embeddings have shape {reference.shape}; the model's dimension is "
                f"{embedder.dimension}"
            )
        ours = embed_in_batches(
            embedder.embed_texts,
            refs.vector_texts,
            batch_size=batch_size,
            progress=progress_bar(len(refs.vector_texts), label="vectors", enabled=progress),
        )
        checks.append(check_vectors(ours, reference, refs.vector_texts, min_cosine=min_cosine))
        if images is not None:
            if images.shape[1] != embedder.dimension:
                raise ToolError(
                    f"images have dimension {images.shape[1]}; the model's is {embedder.dimension}"
                )
            stats = topk_overlap(ours, reference, images, k=top_k)
            checks.append(
                Check(
                    "retrieval",
                    f"top-{stats.k} overlap mean {stats.mean:.3f} min {stats.min:.3f}, top-1 "
                    f"agreement {stats.top1_agreement:.3f} ({stats.queries} queries, "
                    f"{stats.corpus} images)",
                    f"mean >= {min_overlap}",
                    stats.mean >= min_overlap,
                )
            )
    elif images is not None:
        raise ToolError("--images needs reference embeddings ({text, embedding} records)")
    return checks


def check_files(bundle: BundlePaths, manifest: Manifest) -> Check:
    """Each file the manifest lists, against its recorded sha256 and size."""
    files = manifest.files
    if not files:
        return Check("files", "the manifest records no hashes (not checked)")
    locations = {bundle.onnx.name: bundle.onnx, bundle.tokenizer.name: bundle.tokenizer}
    bad = []
    for name, entry in files.items():
        path = locations.get(name, bundle.onnx.parent / name)
        expected = entry.sha256
        if not path.is_file():
            bad.append(f"{name}: missing")
        elif expected and sha256_file(path) != expected:
            bad.append(f"{name}: sha256 differs from the manifest's")
    return Check(
        "files",
        f"{len(files) - len(bad)}/{len(files)} files match the manifest's sha256",
        "all",
        not bad,
        bad,
    )


def check_tokens(
    embedder: Embedder,
    refs: References,
    *,
    max_mismatches: int,
    batch_size: int,
    progress: bool,
) -> Check:
    texts, expected = refs.token_texts, refs.token_ids
    details: list[str] = []
    tokenizer = embedder.tokenizer
    if tokenizer is not None and embedder.bundle is not None:
        # In process: the bundle's own ids, compared exactly, each mismatch explained.
        ours = tokenizer.encode_texts(texts).ids.tolist()
        details = [
            f"{_quote(text)}: {reason}"
            for text, reason in id_mismatches(tokenizer, texts, ours, expected, decode=True)
        ]
        how = "texts give identical ids"
    else:
        # An endpoint: its vector for the text must equal its vector for the reference ids.
        import openai

        by_text = embed_in_batches(
            embedder.embed_texts,
            texts,
            batch_size=batch_size,
            progress=progress_bar(len(texts), label="tokens: texts", enabled=progress),
        )
        try:
            by_ids = embed_in_batches(
                embedder.embed_token_ids,
                expected,
                batch_size=batch_size,
                progress=progress_bar(len(texts), label="tokens: ids", enabled=progress),
            )
        except openai.BadRequestError as exc:
            if getattr(exc, "code", None) != "token_ids_rejected":
                raise
            return Check(
                "tokenizer",
                "not checked: the endpoint refuses token ids (SIGLIP_TOKEN_ID_INPUTS=reject; "
                "TokenIdInputs=accept to check them); the vectors check still covers the texts",
            )
        cosine = np.einsum("ij,ij->i", by_text.astype(np.float64), by_ids.astype(np.float64))
        for text, value in zip(texts, cosine, strict=True):
            if value < SAME_IDS_COSINE:
                details.append(
                    f"{_quote(text)}: the endpoint's vector for the text differs from its "
                    f"vector for the reference ids (cosine {value:.6f}); run verify on the "
                    "bundle in process for the cause"
                )
        how = "texts: endpoint vector for the text equals the one for the reference ids"
    mismatches = len(details)
    cause = likely_cause(embedder, expected) if mismatches > max_mismatches else None
    return Check(
        "tokenizer",
        f"{len(texts) - mismatches}/{len(texts)} {how}",
        f"<= {max_mismatches} mismatches",
        mismatches <= max_mismatches,
        details,
        cause,
    )


#: The contract's ids (docs/contract.md: Gemma's <pad>=0, <eos>=1, <bos>=2), for a reference
#: checked against an endpoint, whose tokenizer verify cannot see.
CONTRACT_IDS = {"pad": 0, "eos": 1, "bos": 2}


def likely_cause(embedder: Embedder, expected: list[list[int]]) -> str | None:
    """Names the transformers 4/5 split when the reference rows show its signature.

    A reference whose rows mostly start with ``<bos>`` (and hold no ``<eos>``) was made by
    calling a tokenizer whose post-processor prepends ``<bos>``: what transformers >= 5
    does with a SigLIP 2 checkpoint whose tokenizer.json and tokenizer_config.json disagree
    (it keeps the post-processor and ignores add_bos_token/add_eos_token; transformers 4
    rebuilt it from them). A bundle's manifest may say so too (``checkpoint_tokenizer``).
    """
    ids = dict(CONTRACT_IDS)
    note = None
    if embedder.tokenizer is not None:
        bos = embedder.tokenizer.bos_id
        ids = {
            "pad": embedder.tokenizer.pad_id,
            "eos": embedder.tokenizer.eos_id,
            "bos": -1 if bos is None else bos,
        }
    if embedder.manifest is not None and embedder.manifest.checkpoint_tokenizer:
        note = embedder.manifest.checkpoint_tokenizer.note
    rows = [r for r in expected if r]
    with_bos = sum(1 for r in rows if r[0] == ids["bos"])
    without_eos = sum(1 for r in rows if ids["eos"] not in r)
    if not rows or with_bos < len(rows) / 2:
        return None
    shape = "start with <bos>" + (" and hold no <eos>" if without_eos >= len(rows) / 2 else "")
    message = (
        f"likely cause: {with_bos} of {len(rows)} reference rows {shape}. The reference was "
        "made by calling a tokenizer whose post-processor prepends <bos>: transformers >= 5 "
        "does this with a SigLIP 2 checkpoint whose tokenizer.json (Gemma's, <bos> "
        "prepended) and tokenizer_config.json (add_bos_token false, add_eos_token true) "
        "disagree; transformers 4 followed the config. Make the reference with `siglip-text "
        "reference` (the contract's ids whatever the version), or build the pipeline's ids "
        "with add_special_tokens=False, then <eos> and <pad>"
    )
    return message + (f". The export recorded: {note}" if note else "")


def check_vectors(
    ours: np.ndarray, reference: np.ndarray, texts: list[str], *, min_cosine: float
) -> Check:
    stats = compare_vectors(ours, reference)
    cosine = np.einsum(
        "ij,ij->i",
        ours / np.linalg.norm(ours, axis=1, keepdims=True),
        reference / np.linalg.norm(reference, axis=1, keepdims=True),
    )
    details = [
        f"{_quote(texts[i])}: cosine {cosine[i]:.6f}"
        for i in np.argsort(cosine)
        if cosine[i] < min_cosine
    ]
    return Check(
        "vectors",
        f"{stats.count} texts: cosine min {stats.cosine_min:.6f} mean {stats.cosine_mean:.6f} "
        f"p01 {stats.cosine_p01:.6f}, max abs error {stats.max_abs_error:.2e}",
        f"min >= {min_cosine}",
        stats.cosine_min >= min_cosine,
        details,
    )


def _quote(text: str, limit: int = 48) -> str:
    shown = text if len(text) <= limit else text[: limit - 3] + "..."
    return json.dumps(shown, ensure_ascii=False)
