"""`siglip-text export`: the command line of the export pipeline (pipeline.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...engine.errors import SiglipError
from ..exit_status import EXIT_CHECK_FAILED, EXIT_OK, CheckFailed
from ..lowercase import LOWERCASE_CHOICES
from .checks import FP32_MIN_COSINE, INT8_MIN_COSINE
from .onnx_export import DEFAULT_OPSET


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        metavar="SOURCE",
        help="a Hugging Face model id (needs --revision) or a save_pretrained directory",
    )
    parser.add_argument("--out", type=Path, required=True, help="the bundle directory to write")
    parser.add_argument(
        "--repository",
        help="the model id recorded in the manifest (required for a local SOURCE; default: "
        "SOURCE when it is a Hub id)",
    )
    parser.add_argument(
        "--revision",
        help="the checkpoint's full 40-character commit SHA (required); for a Hub id, a branch "
        "or tag (e.g. main) is resolved once to its SHA, which is printed and recorded",
    )
    parser.add_argument(
        "--precision",
        choices=["fp32", "int8"],
        default="int8",
        help="int8 (default, recommended: 7-bit weights, exact on every CPU Lambda runs, a "
        "quarter of fp32's size and faster on every CPU measured, docs/performance.md) or "
        "fp32 (where int8's fidelity on your queries, checked with verify, is not enough)",
    )
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
        "--plain-graph",
        action="store_true",
        help="export transformers' own forward (default: the tower written for ONNX "
        "Runtime's fused attention, LayerNorm and GELU kernels, last layer at the pooled "
        "position only; the same vectors, checked against PyTorch)",
    )
    parser.add_argument(
        "--keep-all-merges",
        action="store_true",
        help="keep every BPE merge and vocabulary entry in tokenizer.json (default: drop "
        "those no lowercased text can use or produce; the same ids, a faster load)",
    )
    parser.add_argument(
        "--int8-weights",
        choices=["per-channel", "per-tensor"],
        default="per-channel",
        help="int8: one weight scale per output column (default) or one per tensor",
    )
    parser.add_argument(
        "--int8-weight-form",
        choices=["int7", "int8", "uint8"],
        default="int7",
        help="int8: MatMul weights in -64..64 (int7, default: exact on every x86 kernel and "
        "arm64), -127..127 (int8: saturates on AVX2 without VNNI) or uint8 (docs/cpus.md)",
    )
    parser.add_argument(
        "--skip-memory-check",
        action="store_true",
        help="export even when the machine's available memory plus free swap is below what "
        "the export needs (stated at the start, from the checkpoint's parameter count)",
    )
    parser.add_argument(
        "--fidelity-corpus",
        type=int,
        default=512,
        help="int8: synthetic corpus size for the top-10 overlap (512)",
    )


def run(args: argparse.Namespace) -> int:
    from .pipeline import ExportOptions, export_bundle
    from .report import summary

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
        fuse=not args.plain_graph,
        per_channel=args.int8_weights == "per-channel",
        int8_weight_form=args.int8_weight_form,
        prune_merges=not args.keep_all_merges,
        check_memory=not args.skip_memory_check,
    )
    try:
        report = export_bundle(options)
    except (CheckFailed, SiglipError) as exc:
        # A bundle that fails its checks (a SiglipError here is the init probe's) is a
        # failed check: exit status 1.
        message = exc.message if isinstance(exc, SiglipError) else str(exc)
        print(
            f"siglip-text export: FAILED: {message}\n(no manifest.json was written: "
            f"{options.out} cannot be served)",
            file=sys.stderr,
        )
        return EXIT_CHECK_FAILED
    print(summary(report))
    return EXIT_OK
