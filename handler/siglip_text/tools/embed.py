"""`siglip-text embed`: embed a text file (one per line) or JSONL into ``.npy`` or JSONL.

Row ``i`` of the output is line (or record) ``i`` of the input; vectors are the served ones
(L2-normalized float32). JSONL output keeps each input record and adds ``embedding``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..engine.errors import SiglipError
from .backends import add_backend_arguments, embed_in_batches, open_embedder, progress_bar
from .exit_status import ToolError
from .files import is_jsonl, read_texts, write_jsonl


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", type=Path, metavar="INPUT", help="text file or .jsonl")
    parser.add_argument("--out", type=Path, required=True, help="a .npy or .jsonl file")
    parser.add_argument("--text-field", default="text", help="JSONL field holding the text")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    add_backend_arguments(parser)


def run(args: argparse.Namespace) -> int:
    out: Path = args.out
    if out.suffix.lower() != ".npy" and not is_jsonl(out):
        raise ToolError(f"--out {out}: must end in .npy or .jsonl")
    texts, records = read_texts(args.input, field=args.text_field)
    if not texts:
        raise ToolError(f"{args.input}: no texts")
    embedder = open_embedder(args)
    try:
        vectors = embed_in_batches(
            embedder.embed_texts,
            texts,
            batch_size=max(1, args.batch_size),
            progress=progress_bar(len(texts), label="embed", enabled=not args.quiet),
        )
    except Exception as exc:  # an endpoint's refusal (openai errors) or an inference error
        message = exc.message if isinstance(exc, SiglipError) else str(exc)
        print(f"siglip-text embed: {type(exc).__name__}: {message}", file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix.lower() == ".npy":
        np.save(out, vectors.astype(np.float32, copy=False))
    else:
        rows = records if records is not None else [{"text": t} for t in texts]
        write_jsonl(
            out,
            (
                {**row, "embedding": [float(x) for x in vec]}
                for row, vec in zip(rows, vectors, strict=True)
            ),
        )
    print(f"wrote {len(texts)} x {vectors.shape[1]} vectors ({embedder.model_id}) to {out}")
    return 0
