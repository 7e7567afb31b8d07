"""`siglip-text verify`: prove a bundle or an endpoint equal to the GPU pipeline.

The reference is what your index was built with, as JSONL records ``{"text", "input_ids"}``
and/or ``{"text", "embedding"}`` (``siglip-text reference`` writes both from transformers;
``text`` is the raw text, before any lowercasing). Checks:

- files: the bundle's files against the manifest's sha256 (in process only);
- tokenizer: our ids equal the reference's, text by text; each mismatch names its likely
  cause (pad id, padding side, lowercasing, BOS, EOS, length). Against ``--url`` the
  endpoint's vector for the text is compared with its vector for the reference ids;
- vectors: cosine min / mean / 1st percentile and the largest component error;
- retrieval: with ``--images`` (an ``.npy`` of image embeddings), the share of each
  reference top-k that our vectors also retrieve.

Exit status 0 when every check meets its threshold, 1 when one misses, 2 on unusable input.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..backends import (
    Embedder,
    LocalEmbedder,
    Progress,
    add_backend_arguments,
    embed_in_batches,
    open_embedder,
)
from ...errors import SiglipError
from ...bundle import sha256_file
from ..parity import compare_vectors, explain_id_mismatch, topk_overlap
from ..files import ToolError, load_matrix, read_jsonl

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

    @property
    def status(self) -> str:
        return "PASS" if self.passed else "FAIL"


@dataclass
class References:
    token_texts: list[str] = field(default_factory=list)
    token_ids: list[list[int]] = field(default_factory=list)
    vector_texts: list[str] = field(default_factory=list)
    vectors: list[list[float]] = field(default_factory=list)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reference",
        type=Path,
        action="append",
        required=True,
        metavar="JSONL",
        help="reference records {text, input_ids} and/or {text, embedding} (repeatable)",
    )
    parser.add_argument(
        "--images", type=Path, help="image embeddings [N, D] (.npy) for retrieval parity"
    )
    parser.add_argument("--top-k", type=int, default=10, help="retrieval depth (10)")
    parser.add_argument(
        "--min-cosine", type=float, default=0.999, help="lowest cosine allowed (0.999)"
    )
    parser.add_argument(
        "--min-overlap",
        type=float,
        default=0.9,
        help="lowest mean top-k overlap allowed (0.9)",
    )
    parser.add_argument(
        "--max-token-mismatches",
        type=int,
        default=0,
        help="texts allowed to tokenize differently (0)",
    )
    parser.add_argument("--show", type=int, default=10, help="mismatches listed per check (10)")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    add_backend_arguments(parser)


def run(args: argparse.Namespace) -> int:
    references = load_references(args.reference)
    images = load_matrix(args.images, what="images") if args.images else None
    embedder = open_embedder(args)
    try:
        checks = verify(
            embedder,
            references,
            images=images,
            top_k=args.top_k,
            min_cosine=args.min_cosine,
            min_overlap=args.min_overlap,
            max_token_mismatches=args.max_token_mismatches,
            batch_size=args.batch_size,
            progress=not args.quiet,
        )
    except ToolError:
        raise
    except Exception as exc:  # an endpoint's refusal (openai errors) or an inference fault
        message = exc.message if isinstance(exc, SiglipError) else str(exc)
        print(f"siglip-text verify: {type(exc).__name__}: {message}", file=sys.stderr)
        return 2
    where = (
        f"endpoint {args.url}"
        if args.url
        else f"bundle {getattr(embedder, 'onnx_path', Path('?')).parent}"
    )
    print(render(checks, title=f"{embedder.model_id} ({where})", show=args.show))
    if args.json:
        args.json.write_text(
            json.dumps(
                {"model": embedder.model_id, "checks": [asdict(c) for c in checks]}, indent=2
            )
            + "\n"
        )
    return 0 if all(c.passed for c in checks) else 1


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
    if isinstance(embedder, LocalEmbedder):
        checks.append(check_files(embedder))
    else:
        refs, skipped = without_empty_texts(refs)
        if any(skipped):
            checks.append(
                Check(
                    "skipped",
                    f"empty texts (the OpenAI API refuses them): {skipped[0]} id reference(s), "
                    f"{skipped[1]} vector reference(s)",
                )
            )
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
            progress=Progress(len(refs.vector_texts), label="vectors", enabled=progress),
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


def without_empty_texts(refs: References) -> tuple[References, tuple[int, int]]:
    """The references minus empty texts (an endpoint answers them with 400), and how many."""
    kept = References()
    for text, ids in zip(refs.token_texts, refs.token_ids, strict=True):
        if text:
            kept.token_texts.append(text)
            kept.token_ids.append(ids)
    for text, vector in zip(refs.vector_texts, refs.vectors, strict=True):
        if text:
            kept.vector_texts.append(text)
            kept.vectors.append(vector)
    return kept, (
        len(refs.token_texts) - len(kept.token_texts),
        len(refs.vector_texts) - len(kept.vector_texts),
    )


def check_files(embedder: LocalEmbedder) -> Check:
    """Each file the manifest lists, against its recorded sha256 and size."""
    files = embedder.service.manifest.extras.get("files")
    if not isinstance(files, dict) or not files:
        return Check("files", "the manifest records no hashes (not checked)")
    locations = {
        embedder.onnx_path.name: embedder.onnx_path,
        embedder.tokenizer_path.name: embedder.tokenizer_path,
    }
    bad = []
    for name, entry in files.items():
        path = locations.get(name, embedder.onnx_path.parent / name)
        expected = entry.get("sha256") if isinstance(entry, dict) else None
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
    if isinstance(embedder, LocalEmbedder):
        from tokenizers import Tokenizer

        tokenizer = embedder.service.tokenizer
        decoder = Tokenizer.from_file(str(embedder.tokenizer_path))
        bos = decoder.token_to_id("<bos>")
        ours = tokenizer.encode_texts(texts).ids.tolist()
        for text, mine, ref in zip(texts, ours, expected, strict=True):
            if mine != ref:
                reason = explain_id_mismatch(
                    mine,
                    ref,
                    pad_id=tokenizer.pad_id,
                    eos_id=tokenizer.eos_id,
                    bos_id=bos,
                    decode=lambda ids: decoder.decode(ids, skip_special_tokens=False),
                )
                details.append(f"{_quote(text)}: {reason}")
        how = "texts give identical ids"
    else:
        by_text = embed_in_batches(
            embedder.embed_texts,
            texts,
            batch_size=batch_size,
            progress=Progress(len(texts), label="tokens: texts", enabled=progress),
        )
        by_ids = embed_in_batches(
            embedder.embed_token_ids,
            expected,
            batch_size=batch_size,
            progress=Progress(len(texts), label="tokens: ids", enabled=progress),
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
    count = len(texts) - len(details)
    return Check(
        "tokenizer",
        f"{count}/{len(texts)} {how}",
        f"<= {max_mismatches} mismatches",
        len(details) <= max_mismatches,
        details,
    )


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


def render(checks: list[Check], *, title: str, show: int = 10) -> str:
    """A fixed-width table, then the first ``show`` details of each failing check."""
    headers = ("check", "result", "threshold", "status")
    rows = [(c.name, c.result, c.threshold, c.status) for c in checks]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [f"verify {title}", line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for check in checks:
        if check.details and not check.passed:
            out.append(f"\n{check.name}: {len(check.details)} mismatch(es)")
            out += [f"  {d}" for d in check.details[:show]]
            if len(check.details) > show:
                out.append(f"  ... and {len(check.details) - show} more")
    verdict = "PASS" if all(c.passed for c in checks) else "FAIL"
    out.append(f"\n{verdict}: {sum(c.passed for c in checks)}/{len(checks)} checks passed")
    return "\n".join(out)


def _quote(text: str, limit: int = 48) -> str:
    shown = text if len(text) <= limit else text[: limit - 3] + "..."
    return json.dumps(shown, ensure_ascii=False)
