"""`siglip-text embed`: embed a text file (one per line) or JSONL into ``.npy`` or JSONL.

Row ``i`` of the output is line (or record) ``i`` of the input; vectors are the served ones
(L2-normalized float32). JSONL output keeps each input record and adds ``embedding``.

With ``--url`` the texts go to a deployment, ``--concurrency`` requests in flight, retried on
429/503 (``Retry-After``) and transient failures, written in input order as they complete; an
interrupted run started again embeds only the rest (tools/bulk.py; docs/bulk.md). In process
(``--demo``, ``--model-dir``) the same output and resume, one batch at a time.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ..engine.errors import SiglipError
from .backends import add_backend_arguments, open_embedder
from .bulk import (
    DEFAULT_BATCH_CAP,
    DEFAULT_MAX_RETRIES,
    FALLBACK_BATCH_SIZE,
    Endpoint,
    EndpointError,
    JsonlOutput,
    NpyOutput,
    Output,
    RunRecord,
    input_digest,
    report,
    run_batches,
    summary,
)
from .exit_status import ToolError
from .files import is_jsonl, read_texts

#: In process, texts per model call unless ``--batch-size`` says otherwise.
LOCAL_BATCH_SIZE = 64
#: With ``--url``, requests in flight unless ``--concurrency`` says otherwise.
DEFAULT_CONCURRENCY = 4
#: The variable the client tools read the API key from (``--api-key`` wins).
API_KEY_VARIABLE = "SIGLIP_API_KEY"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", type=Path, metavar="INPUT", help="text file or .jsonl")
    parser.add_argument("--out", type=Path, required=True, help="a .npy or .jsonl file")
    parser.add_argument("--text-field", default="text", help="JSONL field holding the text")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    add_backend_arguments(parser)
    for action in parser._actions:  # the shared option, with this command's own default
        if action.dest == "batch_size":
            action.default = None
            action.help = (
                "texts per request or model call (default: with --url the bound the server "
                f"reports in /health, at most {DEFAULT_BATCH_CAP}, else {FALLBACK_BATCH_SIZE}; "
                f"in process {LOCAL_BATCH_SIZE})"
            )
    bulk = parser.add_argument_group("with --url (docs/bulk.md)")
    bulk.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help=f"requests in flight (default {DEFAULT_CONCURRENCY}; keep it within the "
        "function's reserved concurrency)",
    )
    bulk.add_argument(
        "--max-retries",
        type=int,
        default=DEFAULT_MAX_RETRIES,
        help="retries of one batch after 429, 5xx, a timeout or a lost connection before the "
        f"run stops (default {DEFAULT_MAX_RETRIES}; the same command then resumes)",
    )
    bulk.add_argument(
        "--timeout", type=float, default=120.0, help="seconds per request (default 120)"
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="embed everything again, discarding what an earlier run of this output wrote "
        "(by default a run resumes after it)",
    )


def run(args: argparse.Namespace) -> int:
    out: Path = args.out
    if out.suffix.lower() != ".npy" and not is_jsonl(out):
        raise ToolError(f"--out {out}: must end in .npy or .jsonl")
    if args.batch_size is not None and args.batch_size < 1:
        raise ToolError("--batch-size must be at least 1")
    if args.concurrency is not None and args.concurrency < 1:
        raise ToolError("--concurrency must be at least 1")
    if args.max_retries < 0:
        raise ToolError("--max-retries must be at least 0")
    texts, records = read_texts(args.input, field=args.text_field)
    if not texts:
        raise ToolError(f"{args.input}: no texts")
    rows = records if records is not None else [{"text": t} for t in texts]

    endpoint: Endpoint | None = None
    if args.url:
        endpoint = Endpoint(
            args.url,
            api_key=args.api_key or os.environ.get(API_KEY_VARIABLE),
            timeout=args.timeout,
            max_retries=args.max_retries,
        )
        health = endpoint.health()
        model = str(args.model or health.get("model") or "")
        dimension = int(health["embedding_dimension"])
        batch_size = batch_size_for(args.batch_size, health.get("max_inputs_per_request"))
        concurrency = args.concurrency or DEFAULT_CONCURRENCY
        embed_batch = _remote(endpoint, model=model, dimension=dimension)
    else:
        if (args.concurrency or 1) > 1:
            raise ToolError(
                "--concurrency needs --url; in process, --threads sets ONNX Runtime's threads"
            )
        batch_size = args.batch_size or LOCAL_BATCH_SIZE
        args.batch_size = batch_size
        embedder = open_embedder(args)
        model, dimension, concurrency = embedder.model_id, embedder.dimension, 1
        embed_batch = embedder.embed_texts

    record = RunRecord(
        out,
        {
            "inputs": len(texts),
            "input_sha256": input_digest(rows),
            "text_field": args.text_field if records is not None else None,
            "model": model,
            "dimension": dimension,
        },
    )
    output: Output
    if out.suffix.lower() == ".npy":
        output = NpyOutput(
            out, record=record, count=len(texts), dimension=dimension, restart=args.restart
        )
    else:
        output = JsonlOutput(out, rows, record=record, dimension=dimension, restart=args.restart)
    progress = tqdm(
        total=len(texts),
        initial=output.done,
        desc="embed",
        unit="text",
        disable=args.quiet,
        file=sys.stderr,
    )
    try:
        totals = run_batches(
            embed_batch,
            texts,
            output,
            batch_size=batch_size,
            concurrency=concurrency,
            progress=progress,
            stop=endpoint.stop if endpoint is not None else None,
        )
    except KeyboardInterrupt:
        progress.close()
        output.close()
        report(f"siglip-text embed: interrupted; {_resume_hint(out)}")
        return 130
    except Exception as exc:  # an endpoint's refusal, an inference error
        progress.close()
        output.close()
        message = exc.message if isinstance(exc, SiglipError) else str(exc)
        kind = "" if isinstance(exc, EndpointError) else f"{type(exc).__name__}: "
        report(f"siglip-text embed: {kind}{message}; {_resume_hint(out)}")
        return 1
    progress.close()
    output.finish()
    if not args.quiet:
        report(summary(totals, endpoint.counters if endpoint is not None else None))
    print(f"wrote {len(texts)} x {dimension} vectors ({model}) to {out}")
    return 0


def batch_size_for(chosen: int | None, reported: Any) -> int:
    """``--batch-size`` if given, else the server's bound (at most `DEFAULT_BATCH_CAP`), else
    `FALLBACK_BATCH_SIZE`. A chosen size past the bound is kept (the server's 413 says so)."""
    if chosen is not None:
        return chosen
    if isinstance(reported, int) and reported >= 1:
        return min(reported, DEFAULT_BATCH_CAP)
    return FALLBACK_BATCH_SIZE


def _remote(endpoint: Endpoint, *, model: str, dimension: int) -> Any:
    def embed_batch(texts: Sequence[str]) -> np.ndarray:
        vectors = endpoint.embed(texts, model=model)
        if vectors.shape[1] != dimension:
            raise EndpointError(
                f"the endpoint answered {vectors.shape[1]}-d vectors, /health says {dimension}"
            )
        return vectors

    return embed_batch


def _resume_hint(out: Path) -> str:
    return (
        f"what is written to {out} is whole and in input order: run the same command again "
        "to embed the rest"
    )
