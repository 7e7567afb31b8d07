#!/usr/bin/env python3
"""One table per model size: what each bundle costs to ship, start and run on Lambda.

    python -m benchmarks.sizes --bundle base-fp32=DIR --bundle base-int8=DIR \\
        --bundle so400m-fp32=DIR ... [--runs 20] [--image]

For every bundle, one after another, each leg in its own process (`run.py`'s ``ort`` leg:
a fresh ``import siglip_text.lambda_function``, then single queries through the handler):

- the bundle's size and what its manifest says it needs resident (``memory``);
- init with a **cold** page cache (the bundle's files evicted first with
  ``posix_fadvise(DONTNEED)``; the libraries stay cached) and with a **warm** one (the leg
  right after); a Lambda cold start also reads the image lazily over the network, so the
  cold figure here is a floor, not a forecast;
- warm latency of one query through the handler at 2 threads and at 1 (`--runs` each,
  median), and the peak RSS after the queries (what the function holds serving);
- with ``--image``: the function image built with the bundle, its size and the init phase
  under AWS's runtime emulator (``image_figures.py``; needs a Docker engine and the base
  image);
- cost per million queries behind each frontend at the `MemorySize` to choose: the cheaper
  of the manifest's recommended memory (at least one vCPU, 1,769 MB) and 3,538 MB (two
  vCPUs), from the measured latencies (`cost.py`: x86_64 prices; arm64's GB-second is 20%
  less). `--report FILE` prints the table of an earlier ``--json`` run.

Latency and init are this machine's: read them side by side, as ratios between sizes; an
int8 bundle runs a different kernel on a CPU without VNNI (docs/cpus.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from siglip_text.aws.sizing import LAMBDA_MB_PER_VCPU
from siglip_text.engine.bundle import load_manifest

from benchmarks.cost import (
    FRONTEND_LABEL,
    FRONTEND_USD_PER_MILLION,
    cost_per_million,
    latency_at_memory,
)
from benchmarks.protocol import ROOT, run_worker

ONE_VCPU_MB = LAMBDA_MB_PER_VCPU
TWO_VCPUS_MB = 2 * LAMBDA_MB_PER_VCPU


def evict(bundle: Path) -> int | None:
    """Drop the bundle's files from the page cache; the bytes still cached after (fincore),
    or None when fincore is missing."""
    for path in bundle.iterdir():
        if path.is_file():
            with path.open("rb") as handle:
                os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    if shutil.which("fincore") is None:
        return None
    files = [str(p) for p in bundle.iterdir() if p.is_file()]
    done = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", *files],
        capture_output=True,
        text=True,
        check=False,
    )
    return sum(int(line.split()[0]) for line in done.stdout.splitlines() if line.strip())


def leg(bundle: Path, threads: int, runs: int) -> dict[str, Any]:
    args = argparse.Namespace(threads=threads, runs=runs, allow_spinning="true", batches=[1])
    vectors = Path(os.environ.get("TMPDIR", "/tmp")) / f"siglip-sizes-{os.getpid()}.npy"
    try:
        return run_worker("ort", args, bundle_dir=str(bundle), vectors_out=str(vectors))
    finally:
        vectors.unlink(missing_ok=True)


def image_figures(bundle: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.image_figures", "--bundle", str(bundle)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    # its figures are the indented JSON object it prints last (the in-process handler it
    # times prints its metrics lines to stdout before it)
    text = "\n" + done.stdout
    return dict(json.loads(text[text.rindex("\n{\n") + 1 :]))


def measure(bundle: Path, *, runs: int, image: bool) -> dict[str, Any]:
    manifest = load_manifest(bundle / "manifest.json")
    files = {name: entry.size or 0 for name, entry in manifest.files.items()}
    record: dict[str, Any] = {
        "bundle": str(bundle),
        "precision": manifest.precision or "fp32",
        "dimension": manifest.embedding_dimension,
        "bundle_mb": round(sum(files.values()) / 1e6, 1),
        "memory": manifest.memory.model_dump() if manifest.memory is not None else None,
    }
    record["cached_after_eviction_mb"] = (
        None if (left := evict(bundle)) is None else round(left / 1e6, 1)
    )
    cold = leg(bundle, 2, runs)
    warm = leg(bundle, 2, runs)
    one = leg(bundle, 1, runs)
    record["init_cold_s"] = round(cold["init"]["total_s"], 2)
    record["init_warm_s"] = round(warm["init"]["total_s"], 2)
    record["latency_ms"] = {
        "2": round(warm["latency"]["1"]["handler"]["median_ms"], 1),
        "1": round(one["latency"]["1"]["handler"]["median_ms"], 1),
    }
    record["rss_after_init_mb"] = round(warm["init"]["rss_mb"])
    record["peak_rss_serving_mb"] = round(max(warm["serving"]["peak_rss_mb"], 0))
    if image:
        record["image"] = image_figures(bundle)
    return record


def candidate_sizes(record: dict[str, Any]) -> list[int]:
    """The manifest's recommended memory (at least one vCPU's 1,769 MB) and two vCPUs'
    3,538 MB when that holds the recommended figure too."""
    memory = record.get("memory") or {}
    fits = max(int(memory.get("recommended_mb") or 0), ONE_VCPU_MB)
    return sorted({fits, max(fits, TWO_VCPUS_MB)})


def memory_size(record: dict[str, Any]) -> int:
    """The MemorySize to choose: the cheaper candidate (the frontend's price is the same
    at every size, so the choice does not depend on it); the faster one on a tie."""
    prices = costs(record)
    return min(
        candidate_sizes(record),
        key=lambda m: (prices[str(m)]["function-url"], prices[str(m)]["latency_ms"]),
    )


def costs(record: dict[str, Any]) -> dict[str, dict[str, float]]:
    latency = {int(t): ms for t, ms in record["latency_ms"].items()}
    out: dict[str, dict[str, float]] = {}
    for memory in candidate_sizes(record):
        ms = latency_at_memory(latency, memory)
        out[str(memory)] = {
            frontend: round(cost_per_million(ms, memory_mb=memory, frontend=frontend).total_usd, 2)
            for frontend in FRONTEND_USD_PER_MILLION
        }
        out[str(memory)]["latency_ms"] = round(ms, 1)
    return out


def markdown(records: dict[str, dict[str, Any]], *, image: bool) -> str:
    head = [
        "bundle",
        "dim",
        "bundle MB",
        "image MB" if image else None,
        "init cold / warm (s)",
        "image INIT REPORT (s)" if image else None,
        "query, 2 / 1 threads (ms)",
        "RSS serving (MB)",
        "memory min / rec. (MB)",
        "MemorySize (est. ms)",
        *(f"$/M {FRONTEND_LABEL[f]}" for f in FRONTEND_USD_PER_MILLION),
    ]
    columns = [c for c in head if c is not None]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for name, r in records.items():
        size = memory_size(r)
        price = costs(r)
        memory = r.get("memory") or {}
        cells = [
            name,
            str(r["dimension"]),
            f"{r['bundle_mb']:,.0f}",
            _image_mb(r) if image else None,
            f"{r['init_cold_s']:.2f} / {r['init_warm_s']:.2f}",
            _image_init(r) if image else None,
            f"{r['latency_ms']['2']:.0f} / {r['latency_ms']['1']:.0f}",
            f"{r['peak_rss_serving_mb']:,}",
            f"{memory.get('minimum_mb', '?'):,} / {memory.get('recommended_mb', '?'):,}"
            if memory
            else "-",
            f"{size:,} ({price[str(size)]['latency_ms']:.0f})",
            *(f"{price[str(size)][f]:.2f}" for f in FRONTEND_USD_PER_MILLION),
        ]
        lines.append("| " + " | ".join(c for c in cells if c is not None) + " |")
    return "\n".join(lines)


def _image_mb(record: dict[str, Any]) -> str:
    figures = record.get("image") or {}
    return f"{figures['image_mb']:,.0f}" if "image_mb" in figures else "-"


def _image_init(record: dict[str, Any]) -> str:
    figures = record.get("image") or {}
    return f"{figures['init_report_ms'] / 1000:.2f}" if "init_report_ms" in figures else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--bundle", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--runs", type=int, default=20, help="queries per latency (median)")
    parser.add_argument("--image", action="store_true", help="also build and run the image")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--report", type=Path, help="print the table of an earlier --json run (no measuring)"
    )
    args = parser.parse_args(argv)
    if args.report:
        earlier = json.loads(args.report.read_text())
        print(markdown(earlier, image=any("image" in r for r in earlier.values())))
        return 0
    if not args.bundle:
        parser.error("--bundle NAME=DIR is required (or --report FILE)")
    bundles = {
        name: Path(path).expanduser() for name, path in (b.split("=", 1) for b in args.bundle)
    }
    began = datetime.now(UTC)
    records: dict[str, dict[str, Any]] = {}
    for name, bundle in bundles.items():
        print(f"[sizes] {name}: {bundle}", file=sys.stderr, flush=True)
        records[name] = measure(bundle, runs=args.runs, image=args.image)
        records[name]["cost_per_million_usd"] = costs(records[name])
        print(f"[sizes] {name}: {json.dumps(records[name])}", file=sys.stderr, flush=True)
        if args.json:  # as it goes: a failure later keeps what was measured
            args.json.write_text(json.dumps(records, indent=2))
    ended = datetime.now(UTC)
    print(
        f"Measured {began:%Y-%m-%d %H:%M} to {ended:%H:%M} UTC, {os.cpu_count()} CPUs, "
        f"{args.runs} queries per latency (median), one text per query.\n"
    )
    print(markdown(records, image=args.image))
    return 0


if __name__ == "__main__":
    sys.exit(main())
