"""`siglip-text export`: a SigLIP / SigLIP 2 checkpoint -> a checked bundle. Export extra.

Writes ``text_model.onnx`` (``input_ids [batch, 64]`` -> ``text_embeds``, the pooled output,
not normalized; weights in ``text_model.onnx.data`` past protobuf's 2 GB), ``tokenizer.json``
(the checkpoint's tokenizer with the contract's lowercasing, EOS and padding written in) and
``manifest.json``. Before the manifest is written, the bundle is loaded with
``load_service`` (what ``serve`` and Lambda run) and compared with transformers and PyTorch
on built-in texts; an fp32 graph below cosine 0.99999 fails the export and leaves no
manifest, so the directory cannot be served.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ...config import MANIFEST_FILE, ONNX_FILE, TOKENIZER_FILE, load_settings
from .tokenizer import LOWERCASE_CHOICES, Lowercase, apply_contract
from ...service import EmbeddingService, load_service
from ...errors import SiglipError
from ...bundle import sha256_file
from .graph import (
    DEFAULT_OPSET,
    OFFLINE_OPTIMIZATION,
    export_text_tower,
    external_data_path,
    optimize_graph,
)
from ..parity import VectorStats, compare_vectors, explain_id_mismatch, topk_overlap
from ..files import ToolError

MAX_LENGTH = 64
FP32_MIN_COSINE = 0.99999
INT8_MIN_COSINE = 0.99
CHECK_MANIFEST = ".manifest.check.json"

#: The texts every export is checked on: edge cases of the contract (empty, whitespace,
#: case, accents, final sigma, CJK, RTL, emoji, control characters, past 64 tokens).
CHECK_TEXTS = [
    "a photo of a cat",
    "this is a photo of a dog.",
    "",
    " ",
    "   \t\n  ",
    "A Photo Of A CAT",
    "Café Crème BRÛLÉE, naïve façade",
    "ÉCOLE Über STRASSE",
    "İstanbul ΣΊΣΥΦΟΣ ΟΔΟΣ",
    "一只猫的照片",
    "東京の夜景の写真",
    "고양이 사진",
    "صورة قطة على الطاولة",
    "תמונה של חתול",
    "🐱🚀 emoji 👩‍👩‍👧 ZWJ family 🇯🇵",
    "control\x00chars\x07and\x1bescape\x7f",
    "tab\tseparated\tand\nnew\r\nlines",
    "e\u0301 combining acute vs é precomposed",
    "punctuation!!! ??? ... (brackets) [more] {braces} \"quotes\" 'single'",
    "numbers 0123456789 3.14159 1,000,000",
    " ".join(["a red block and a robot arm on the kitchen table"] * 12),
    "supercalifragilisticexpialidocious" * 8,
    "x" * 500,
    "🐱" * 80,
]

#: Word lists of the synthetic captions (see synthetic_captions).
_WORDS = {
    "a": "red blue green yellow black white small large old new wooden metal bright dark",
    "n": "cat dog bird car bicycle train boat plane house tree flower robot arm block table "
    "chair sofa bed book cup bottle phone computer camera person child woman man horse cake",
    "p": "kitchen street beach mountain river city park garden office forest desert lake "
    "bridge market stadium classroom",
    "v": "sitting standing running playing sleeping lying walking flying parked floating",
}
_FORMS = [
    "a photo of a {a} {n}",
    "a {a} {n} {v} in the {p}",
    "two {n}s and a {a} {n} near the {p}",
    "close-up of a {n} on a {a} table",
    "A {A} {N} {V} NEXT TO THE {P} at night",
    "the {p} with a {a} {n}, seen from above",
    "{n} {v} by the {p} on a sunny day",
]


def synthetic_captions(count: int, *, seed: int) -> list[str]:
    """Caption-like texts from a fixed grammar (a stand-in for an index's queries)."""
    rng = random.Random(seed)
    words = {key: value.split() for key, value in _WORDS.items()}
    texts = []
    for _ in range(count):
        picked = {key: rng.choice(options) for key, options in words.items()}
        upper = {key.upper(): value.upper() for key, value in picked.items()}
        texts.append(rng.choice(_FORMS).format(**picked, **upper))
    return texts


class ExportCheckFailed(Exception):
    """Raised when the exported bundle does not reproduce the checkpoint closely enough."""


@dataclass
class ExportOptions:
    source: str
    out: Path
    repository: str | None = None
    revision: str | None = None
    precision: str = "fp32"
    lowercase: Lowercase = "unicode"
    opset: int = DEFAULT_OPSET
    threads: int | None = None
    force: bool = False
    min_cosine: float = FP32_MIN_COSINE
    int8_min_cosine: float = INT8_MIN_COSINE
    fidelity_corpus: int = 512
    fidelity_queries: int = 128
    # Weights in text_model.onnx.data, which ONNX Runtime memory-maps: a base fp32 tower
    # then loads in 0.37 s instead of 2.9 s with a peak RSS of 513 MB instead of 1,885 MB
    # (measured on this project's 2-core machines), and the untouched rows of the token
    # table are never read from the image. False keeps one file (only below 2 GB).
    external_data: bool = True
    # ONNX Runtime's graph optimizations, applied once here (see onnx_export.optimize_graph).
    optimize: bool = True


@dataclass
class ExportReport:
    out: Path
    manifest: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        metavar="SOURCE",
        help="a Hugging Face model id (needs --revision SHA) or a save_pretrained directory",
    )
    parser.add_argument("--out", type=Path, required=True, help="the bundle directory to write")
    parser.add_argument(
        "--repository",
        help="the model id recorded in the manifest (required for a local SOURCE; default: "
        "SOURCE when it is a Hub id)",
    )
    parser.add_argument(
        "--revision", help="the full 40-character commit SHA of the checkpoint (required)"
    )
    parser.add_argument("--precision", choices=["fp32", "int8"], default="fp32")
    parser.add_argument(
        "--lowercase",
        choices=LOWERCASE_CHOICES,
        default="unicode",
        help="lowercasing written into tokenizer.json: unicode (Python's str.lower, default), "
        "ascii (A-Z only, as big_vision), none",
    )
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET, help="ONNX opset (17)")
    parser.add_argument("--threads", type=int, help="ONNX Runtime threads for the checks")
    parser.add_argument(
        "--force", action="store_true", help="write into a non-empty --out directory"
    )
    parser.add_argument(
        "--min-cosine",
        type=float,
        default=FP32_MIN_COSINE,
        help=f"fp32 graph vs PyTorch, lowest cosine allowed ({FP32_MIN_COSINE})",
    )
    parser.add_argument(
        "--int8-min-cosine",
        type=float,
        default=INT8_MIN_COSINE,
        help=f"int8 graph vs fp32 graph, lowest cosine allowed ({INT8_MIN_COSINE})",
    )
    parser.add_argument(
        "--single-file",
        action="store_true",
        help="keep the weights inside text_model.onnx (default: a .data file beside it, which "
        "ONNX Runtime memory-maps; much faster init and less memory)",
    )
    parser.add_argument(
        "--no-optimize",
        action="store_true",
        help="skip ONNX Runtime's offline graph optimization (default: done once at export, "
        "so the server loads the graph without optimizing it again)",
    )
    parser.add_argument(
        "--fidelity-corpus",
        type=int,
        default=512,
        help="int8: synthetic corpus size for the top-10 overlap (512)",
    )


def run(args: argparse.Namespace) -> int:
    options = ExportOptions(
        source=args.source,
        out=args.out,
        repository=args.repository,
        revision=args.revision,
        precision=args.precision,
        lowercase=args.lowercase,
        opset=args.opset,
        threads=args.threads,
        force=args.force,
        min_cosine=args.min_cosine,
        int8_min_cosine=args.int8_min_cosine,
        fidelity_corpus=args.fidelity_corpus,
        external_data=not args.single_file,
        optimize=not args.no_optimize,
    )
    try:
        report = export_bundle(options)
    except (ExportCheckFailed, SiglipError) as exc:
        message = exc.message if isinstance(exc, SiglipError) else str(exc)
        print(
            f"siglip-text export: FAILED: {message}\n(no manifest.json was written: "
            f"{options.out} cannot be served)",
            file=sys.stderr,
        )
        return 1
    print(summary(report))
    return 0


def _log(message: str) -> None:
    print(f"[export] {message}", file=sys.stderr, flush=True)


def validate(options: ExportOptions) -> Any:
    """Fail closed before loading anything: SHA revision, repository, output directory."""
    from .checkpoint import resolve_source

    spec = resolve_source(options.source, revision=options.revision, require_revision=True)
    if spec.kind == "local":
        missing = [
            flag
            for flag, value in (("--repository", options.repository), ("--revision", spec.revision))
            if not value
        ]
        if missing:
            raise ToolError(
                f"{options.source} is a local directory: {' and '.join(missing)} must say which "
                "Hub repository and commit it was saved from (the manifest records them)"
            )
    if options.repository is not None and not options.repository.strip():
        raise ToolError("--repository must not be blank")
    if options.precision not in ("fp32", "int8"):
        raise ToolError(f"--precision must be fp32 or int8, not {options.precision!r}")
    out = options.out
    if out.exists() and not out.is_dir():
        raise ToolError(f"--out {out}: exists and is not a directory")
    if out.exists() and any(out.iterdir()) and not options.force:
        raise ToolError(f"--out {out}: directory is not empty (pass --force to overwrite)")
    return spec


def export_bundle(options: ExportOptions) -> ExportReport:
    """Export, check against PyTorch, quantize if asked, write the manifest last."""
    spec = validate(options)
    from .checkpoint import load_checkpoint

    timings: dict[str, float] = {}
    started = time.perf_counter()
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    for stale in (MANIFEST_FILE, CHECK_MANIFEST):
        (out / stale).unlink(missing_ok=True)

    _log(f"loading {spec.source} with transformers")
    began = time.perf_counter()
    checkpoint = load_checkpoint(spec)
    timings["load_s"] = time.perf_counter() - began
    if checkpoint.max_positions < MAX_LENGTH:
        raise ToolError(
            f"{spec.source}: the text tower has {checkpoint.max_positions} positions, fewer "
            f"than the contract's {MAX_LENGTH}"
        )

    tokenizer_path = out / TOKENIZER_FILE
    write_contract_tokenizer(checkpoint.tokenizer, tokenizer_path, lowercase=options.lowercase)

    onnx_path = out / ONNX_FILE
    scratch = Path(tempfile.mkdtemp(prefix=".fp32-", dir=out))
    try:
        fp32_path = onnx_path if options.precision == "fp32" else scratch / ONNX_FILE
        _log(f"exporting the text tower to ONNX (opset {options.opset})")
        began = time.perf_counter()
        export_text_tower(
            checkpoint.tower,
            fp32_path,
            max_length=MAX_LENGTH,
            opset=options.opset,
            external_data=options.external_data,
        )
        timings["onnx_export_s"] = time.perf_counter() - began

        base = _contract_fields(options, spec, checkpoint)
        # What is served: the optimized graph, loaded as the server will load it.
        final = {**base, "graph_optimization": OFFLINE_OPTIMIZATION} if options.optimize else base
        if options.precision == "fp32" and options.optimize:
            began = time.perf_counter()
            optimize_graph(fp32_path)
            timings["optimize_s"] = time.perf_counter() - began
        _log("checking the fp32 graph (load_service, as serve) against PyTorch")
        began = time.perf_counter()
        fp32_fields = final if options.precision == "fp32" else base
        fp32_service = _load(fp32_fields, fp32_path, tokenizer_path, scratch, options.threads)
        check = check_against_checkpoint(
            fp32_service, checkpoint, lowercase=options.lowercase, min_cosine=options.min_cosine
        )
        timings["check_s"] = time.perf_counter() - began

        quantization: dict[str, Any] | None = None
        fidelity: dict[str, Any] | None = None
        if options.precision == "int8":
            from .quantize import quantize_int8

            _log("quantizing to int8 (MatMul weights per column, token table per row)")
            began = time.perf_counter()
            quantization = quantize_int8(
                fp32_path, onnx_path, external_data=options.external_data
            ).as_dict()
            timings["quantize_s"] = time.perf_counter() - began
            if options.optimize:
                began = time.perf_counter()
                optimize_graph(onnx_path)
                timings["optimize_s"] = time.perf_counter() - began
            began = time.perf_counter()
            int8_service = _load(final, onnx_path, tokenizer_path, out, options.threads)
            _log("measuring int8 fidelity against fp32 (cosine, top-10 overlap)")
            fidelity = measure_int8_fidelity(
                int8_service,
                fp32_service,
                corpus_size=options.fidelity_corpus,
                queries=options.fidelity_queries,
            )
            timings["fidelity_s"] = time.perf_counter() - began
            fidelity["fp32_vs_pytorch"] = check["vs_pytorch"]
            check = check_against_checkpoint(
                int8_service, checkpoint, lowercase=options.lowercase, min_cosine=None
            )
            if fidelity["cosine"]["cosine_min"] < options.int8_min_cosine:
                raise ExportCheckFailed(
                    f"int8 graph vs fp32: lowest cosine {fidelity['cosine']['cosine_min']:.6f} "
                    f"is below {options.int8_min_cosine} (--int8-min-cosine)"
                )
            del int8_service
        del fp32_service
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        (out / CHECK_MANIFEST).unlink(missing_ok=True)

    timings["total_s"] = time.perf_counter() - started
    manifest = {
        **final,
        **provenance(options, spec, checkpoint),
        "export_check": check,
        **({"quantization": quantization} if quantization else {}),
        **({"fidelity": fidelity} if fidelity else {}),
        "export_seconds": round(timings["total_s"], 1),
        "files": file_entries(out),
    }
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return ExportReport(out=out, manifest=manifest, timings=timings)


def write_contract_tokenizer(hf_tokenizer: Any, path: Path, *, lowercase: Lowercase) -> None:
    """The checkpoint's own tokenizer (a copy) with the contract written in."""
    from tokenizers import Tokenizer

    backend = getattr(hf_tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ToolError(
            "the checkpoint's tokenizer has no tokenizer.json form (a fast tokenizer is needed)"
        )
    tokenizer = Tokenizer.from_str(backend.to_str())
    try:
        apply_contract(tokenizer, lowercase=lowercase, max_length=MAX_LENGTH)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    tokenizer.save(str(path))


def _contract_fields(options: ExportOptions, spec: Any, checkpoint: Any) -> dict[str, Any]:
    import torch

    with torch.inference_mode():
        probe = checkpoint.tower(input_ids=torch.zeros((1, MAX_LENGTH), dtype=torch.long))
    return {
        "repository": options.repository or spec.source,
        "revision": spec.revision.lower(),
        "embedding_dimension": int(probe.pooler_output.shape[-1]),
        "text_max_token_length": MAX_LENGTH,
    }


def _load(
    manifest: dict[str, Any],
    onnx_path: Path,
    tokenizer_path: Path,
    where: Path,
    threads: int | None,
) -> EmbeddingService:
    """load_service on these files, with every path explicit (no SIGLIP_* variable wins)."""
    manifest_path = where / CHECK_MANIFEST
    manifest_path.write_text(json.dumps(manifest))
    settings = load_settings(
        model_manifest_path=manifest_path,
        onnx_model_path=onnx_path,
        tokenizer_path=tokenizer_path,
        onnx_output_name="text_embeds",
        cache_size=0,
        max_text_batch_size=32,
        **({"ort_intra_op_threads": threads} if threads else {}),
    )
    return load_service(settings)


def check_against_checkpoint(
    service: EmbeddingService, checkpoint: Any, *, lowercase: Lowercase, min_cosine: float | None
) -> dict[str, Any]:
    """Tokenizer parity with transformers and vectors against PyTorch on CHECK_TEXTS.

    The vectors are compared on the same ids (ours), so a tokenizer difference and a graph
    difference each get their own message. Raises ExportCheckFailed when either misses.
    """
    from .checkpoint import pooled_vectors, reference_token_ids

    texts = CHECK_TEXTS
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
    """int8 against fp32: cosine on CHECK_TEXTS + queries, top-10 over a synthetic corpus.

    The corpus stands in for an index built with full precision: it is embedded once with
    fp32, and the queries are ranked against it with fp32 and with int8 query vectors.
    """
    corpus_texts = synthetic_captions(corpus_size, seed=1)
    query_texts = synthetic_captions(queries, seed=2)
    corpus = fp32.embed_texts(corpus_texts).vectors
    reference = fp32.embed_texts(query_texts).vectors
    ours = int8.embed_texts(query_texts).vectors
    check_texts = fp32.embed_texts(CHECK_TEXTS).vectors
    cosine = compare_vectors(
        np.concatenate([int8.embed_texts(CHECK_TEXTS).vectors, ours]),
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


def provenance(options: ExportOptions, spec: Any, checkpoint: Any) -> dict[str, Any]:
    import onnx
    import onnxruntime
    import tokenizers
    import torch
    import transformers

    from ... import __version__

    record: dict[str, Any] = {
        "source": spec.source
        if spec.kind == "hub"
        else f"local directory ({Path(spec.source).name})",
        "source_kind": spec.kind,
        "model_type": checkpoint.model_type,
        "architecture": checkpoint.architecture,
        "precision": options.precision,
        "opset": options.opset,
        "lowercase": options.lowercase,
        "output": "text_embeds: pooled output after the head, not normalized",
        "exported_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "libraries": {
            "siglip_text": __version__,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__,
            "tokenizers": tokenizers.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
    }
    if checkpoint.logit_scale is not None:
        record["logit_scale"] = checkpoint.logit_scale
        record["logit_bias"] = checkpoint.logit_bias
        record["probability"] = "sigmoid(cosine * exp(logit_scale) + logit_bias)"
    return record


def file_entries(out: Path) -> dict[str, dict[str, Any]]:
    """sha256 and size of every artifact (the ONNX weights file too, when there is one)."""
    names = [ONNX_FILE, TOKENIZER_FILE]
    if external_data_path(out / ONNX_FILE).exists():
        names.insert(1, external_data_path(out / ONNX_FILE).name)
    return {
        name: {"sha256": sha256_file(out / name), "size": (out / name).stat().st_size}
        for name in names
    }


def summary(report: ExportReport) -> str:
    manifest = report.manifest
    lines = [f"exported {manifest['repository']}@{manifest['revision'][:12]} to {report.out}"]
    lines.append(
        f"  precision {manifest['precision']}, dimension {manifest['embedding_dimension']}, "
        f"lowercase {manifest['lowercase']}, opset {manifest['opset']}"
    )
    for name, entry in manifest["files"].items():
        lines.append(f"  {name:<24} {entry['size'] / 1e6:10.1f} MB  sha256 {entry['sha256'][:16]}")
    stats = VectorStats(**{k: v for k, v in manifest["export_check"]["vs_pytorch"].items()})
    lines.append(
        f"  vs PyTorch ({stats.count} texts): cosine min {stats.cosine_min:.7f} mean "
        f"{stats.cosine_mean:.7f}, max abs error {stats.max_abs_error:.2e}; tokenizer parity "
        f"{stats.count}/{stats.count}"
    )
    if "fidelity" in manifest:
        fid = manifest["fidelity"]
        lines.append(
            f"  int8 vs fp32: cosine min {fid['cosine']['cosine_min']:.6f} mean "
            f"{fid['cosine']['cosine_mean']:.6f}; top-10 overlap mean "
            f"{fid['top10_overlap']['mean']:.3f} min {fid['top10_overlap']['min']:.3f}"
        )
    lines.append("  " + ", ".join(f"{k} {v:.1f}" for k, v in report.timings.items()))
    return "\n".join(lines)
