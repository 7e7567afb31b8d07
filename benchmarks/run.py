#!/usr/bin/env python3
"""Side-by-side benchmark: raw ORT session.run, the Lambda handler end to end, and
transformers on PyTorch, on the same weights, in one run. Prints markdown tables.

    # the tiny demo model (what CI checks runs):
    python -m benchmarks.run --runs 5
    # the full-size base tower made by benchmarks/make_full_model.py:
    python -m benchmarks.run --bundle fp32=~/.cache/siglip-text/bench/base/fp32 \\
        --bundle int8=~/.cache/siglip-text/bench/base/int8 \\
        --checkpoint ~/.cache/siglip-text/bench/base/checkpoint --runs 30

Each leg runs in its own subprocess (clean import and init timings, its own peak RSS) and
the legs run one after another, never at once. Ratios are computed within this one run;
absolute times on a shared 2-core machine are noisy.
"""

# This file is the command line and the driver; `protocol.py` runs a leg in its own process,
# `workers.py` holds the legs, `report.py` prints the tables (and `cost.py` has the prices).

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from benchmarks.protocol import ROOT, run_worker
from benchmarks.report import cost_report, report, spread, tokenizer_note


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--bundle",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="an artifact bundle to measure (repeat: fp32=DIR int8=DIR)",
    )
    parser.add_argument(
        "--checkpoint", help="save_pretrained dir of the same weights (PyTorch leg)"
    )
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None, help="default: CPUs available")
    parser.add_argument(
        "--memory-sizes",
        default="1024,1769,3538",
        help="Lambda memory sizes (MB) for the cost model (README: 1024, 1769, 3538)",
    )
    parser.add_argument(
        "--latency-budgets",
        default="30,50,100,150,250",
        help="latency budgets (ms) for the cheapest-choice table",
    )
    parser.add_argument(
        "--latency",
        action="append",
        default=[],
        metavar="NAME=THREADS:MS,...",
        help="print only the cost model, from these single-query latencies instead of "
        "measuring (e.g. fp32=1:127,2:80 int8=1:42,2:26: handler medians at 1 and 2 threads)",
    )
    parser.add_argument(
        "--allow-spinning",
        choices=["true", "false"],
        default="true",
        help="SIGLIP_ORT_ALLOW_SPINNING for the ORT legs (true: as template.yaml deploys)",
    )
    parser.add_argument(
        "--tokenizer",
        default=os.environ.get("SIGLIP_BENCH_TOKENIZER") or None,
        help="the real tokenizer.json the bundles were made with (make_full_model.py "
        "--tokenizer; default $SIGLIP_BENCH_TOKENIZER): checks and prints that each bundle "
        "has its vocabulary",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measure every leg this many times, alternating their order, and print the "
        "ratios of each repeat and their range",
    )
    parser.add_argument(
        "--no-one-thread",
        action="store_true",
        help="skip the 1-thread legs (the cost model's below-one-vCPU latency)",
    )
    parser.add_argument("--json", help="also write all figures here")
    args = parser.parse_args()
    args.batches = [int(b) for b in str(args.batches).split(",")]
    if args.threads is None:
        from siglip_text.engine.cpu import usable_cpus

        args.threads = usable_cpus()
    if args.latency:
        given = {
            name: {int(t): float(ms) for t, ms in (pair.split(":") for pair in pairs.split(","))}
            for name, pairs in (item.split("=", 1) for item in args.latency)
        }
        print("\n".join(cost_report(given, args, source="the given latencies (not measured here)")))
        return
    bundles = dict(item.split("=", 1) for item in args.bundle) or {
        "fp32": str(ROOT / "handler" / "siglip_text" / "demo")
    }
    bundles = {name: str(Path(path).expanduser()) for name, path in bundles.items()}
    import tempfile

    if args.tokenizer:
        print(tokenizer_note(Path(args.tokenizer).expanduser(), bundles), file=sys.stderr)
    tmp = Path(tempfile.mkdtemp(prefix="siglip-bench-"))
    runs = []
    for repeat in range(args.repeat):
        # Alternate the order of the legs between repeats: a drift in the machine's load
        # then biases no leg more than another.
        order = list(bundles) if repeat % 2 == 0 else list(reversed(bundles))
        print(f"[bench] repeat {repeat + 1} of {args.repeat}: {', '.join(order)}", file=sys.stderr)
        runs.append(measure(args, bundles, order, tmp / str(repeat)))
        if args.json:  # as it goes: a failure later keeps what was measured
            Path(args.json).write_text(json.dumps(runs, indent=2))
    figures = runs[0]
    if args.json:
        Path(args.json).write_text(json.dumps(figures if len(runs) == 1 else runs, indent=2))
    print(report(figures, bundles, args))
    if len(runs) > 1:
        print(spread(runs, bundles, args))


def measure(
    args: argparse.Namespace, bundles: dict[str, str], order: list[str], tmp: Path
) -> dict[str, Any]:
    """Every leg once, in ``order``, each in its own process, one after another."""
    import numpy as np

    tmp.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {"threads": args.threads, "batches": args.batches, "runs": args.runs}
    first = next(iter(bundles.values()))
    floor_dir = tmp / "floor"
    paired: dict[str, str] = {}
    try:
        extra = {"checkpoint": str(Path(args.checkpoint).expanduser())} if args.checkpoint else {}
        figures["floor"] = run_worker(
            "floor", args, bundle_dir=first, floor_dir=str(floor_dir), **extra
        )
        if 1 in args.batches:
            paired = {"floor_dir": str(floor_dir)}
    except SystemExit as exc:  # onnx not installed, or no weight product found: no floor
        lines = [line for line in str(exc).splitlines() if line.strip()]
        figures["floor"] = {"error": lines[-1] if lines else "floor worker failed"}
    for name in order:
        path = bundles[name]
        figures[name] = run_worker(
            "ort", args, bundle_dir=path, vectors_out=str(tmp / f"{name}.npy"), **paired
        )
        if args.threads > 1 and 1 in args.batches and not args.no_one_thread:
            # The cost model needs the 1-vCPU latency too (Lambda below 3,538 MB).
            one = argparse.Namespace(**{**vars(args), "threads": 1, "batches": [1]})
            single = run_worker("ort", one, bundle_dir=path, vectors_out=str(tmp / "one.npy"))
            figures[name]["one_thread_ms"] = single["latency"]["1"]["handler"]["median_ms"]
    if args.checkpoint:
        figures["torch"] = run_worker(
            "torch",
            args,
            checkpoint=str(Path(args.checkpoint).expanduser()),
            bundle_dir=first,
            vectors_out=str(tmp / "torch.npy"),
        )
    reference = tmp / ("torch.npy" if args.checkpoint else f"{next(iter(bundles))}.npy")
    figures["fidelity"] = {
        name: float((np.load(tmp / f"{name}.npy") * np.load(reference)).sum(axis=1).min())
        for name in bundles
    }
    return figures


if __name__ == "__main__":
    main()
