"""`siglip-text verify`: prove a bundle or an endpoint equal to the GPU pipeline.

The reference is what your index was built with, as JSONL records ``{"text", "input_ids"}``
and/or ``{"text", "embedding"}`` (``siglip-text reference`` writes both from the checkpoint;
``text`` is the raw text, before any lowercasing; an empty text is a text). Checks:

- files: the bundle's files against the manifest's sha256 (in process only);
- tokenizer: our ids equal the reference's, text by text; each mismatch names its likely
  cause (pad id, padding side, lowercasing, BOS, EOS, length), and a reference whose rows
  start with ``<bos>`` is named as the transformers 4/5 split. Against ``--url`` the
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
from dataclasses import asdict
from pathlib import Path

from ...engine.errors import SiglipError
from ..backends import add_backend_arguments, open_embedder
from ..exit_status import EXIT_CHECK_FAILED, EXIT_OK, EXIT_UNUSABLE_INPUT, ToolError
from ..files import load_matrix
from .checks import load_references, verify
from .report import render


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
        return EXIT_UNUSABLE_INPUT
    where = (
        f"bundle {embedder.bundle.onnx.parent}"
        if embedder.bundle is not None
        else f"endpoint {args.url}"
    )
    print(render(checks, title=f"{embedder.model_id} ({where})", show=args.show))
    if args.json:
        args.json.write_text(
            json.dumps(
                {"model": embedder.model_id, "checks": [asdict(c) for c in checks]}, indent=2
            )
            + "\n"
        )
    return EXIT_OK if all(c.passed for c in checks) else EXIT_CHECK_FAILED
