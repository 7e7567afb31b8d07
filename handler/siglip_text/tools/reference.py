"""`siglip-text reference`: the contract's ids and the PyTorch vectors for a text file.

Export extra. Runs the checkpoint with transformers on whatever device the machine has
(``--device auto``: CUDA, MPS, CPU) and writes one JSONL record per text:
``{"text", "input_ids", "embedding"}`` (the embedding L2-normalized). The ids are the
contract's (``export.checkpoint.contract_token_ids``: the content ids of the checkpoint's
tokenizer.json, then ``<eos>`` and ``<pad>``), whatever the installed transformers makes of
the tokenizer; the vectors are the tower's for those ids. ``siglip-text verify
--reference`` then checks a bundle or an endpoint against it. If your index was built by
another pipeline, write the same records from that pipeline instead: it is the reference
that matters.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.bundle import Lowercase
from .files import read_texts, write_jsonl
from .lowercase import LOWERCASE_CHOICES
from .parity import unit_rows
from .texts import MAX_LENGTH


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="SOURCE", help="Hub model id or save_pretrained dir")
    parser.add_argument(
        "texts", metavar="TEXTS", type=Path, help="a text file (one per line) or JSONL"
    )
    parser.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    parser.add_argument(
        "--revision",
        help="commit SHA to load from the Hub (recommended; a branch or tag is resolved once "
        "to its SHA, as export does)",
    )
    parser.add_argument(
        "--lowercase",
        choices=LOWERCASE_CHOICES,
        default="unicode",
        help="Python lowercasing applied before the tokenizer (default unicode: str.lower)",
    )
    parser.add_argument("--text-field", default="text", help="JSONL field holding the text")
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda, mps, ...")
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "bfloat16", "float16"],
        help="model dtype (float32 is the reference; others measure your GPU pipeline)",
    )
    parser.add_argument("--batch-size", type=int, default=64)


def run(args: argparse.Namespace) -> int:
    from .export.checkpoint import file_tokenizer, load_checkpoint, pick_device, resolve_source
    from .export.revision import hub_revision

    texts, _ = read_texts(args.texts, field=args.text_field)
    revision = hub_revision(args.source, args.revision)
    if revision != args.revision:
        print(f"[reference] --revision {args.revision} is commit {revision}", file=sys.stderr)
    spec = resolve_source(args.source, revision=revision, require_revision=False)
    device = pick_device(args.device)
    print(f"[reference] loading {spec.source} on {device}", file=sys.stderr)
    checkpoint = load_checkpoint(spec, device=device, dtype=args.dtype)
    records = make_reference(
        checkpoint.tower,
        file_tokenizer(checkpoint),
        texts,
        lowercase=args.lowercase,
        device=device,
        batch_size=args.batch_size,
    )
    count = write_jsonl(args.out, records)
    print(f"wrote {count} reference records to {args.out}")
    return 0


def make_reference(
    tower: Any,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    lowercase: Lowercase,
    device: str = "cpu",
    batch_size: int = 64,
) -> list[dict[str, Any]]:
    """``{text, input_ids, embedding}`` per text: the contract's ids, the tower's vectors.

    ``tokenizer``: the checkpoint's tokenizer.json (``file_tokenizer``, what the command
    uses) or a transformers tokenizer; see ``export.checkpoint.contract_token_ids``.
    """
    from .export.checkpoint import contract_token_ids, pooled_vectors

    ids = contract_token_ids(tokenizer, texts, lowercase=lowercase, max_length=MAX_LENGTH)
    vectors = unit_rows(pooled_vectors(tower, ids, batch_size=batch_size, device=device))
    return [
        {"text": text, "input_ids": row, "embedding": [float(x) for x in vec.astype(np.float32)]}
        for text, row, vec in zip(texts, ids, vectors, strict=True)
    ]
