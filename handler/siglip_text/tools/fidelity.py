"""`siglip-text fidelity`: a bundle's vectors against the fp32 bundle's, on each CPU.

    siglip-text fidelity INT8_BUNDLE --fp32 FP32_BUNDLE \\
        --cpu native,haswell,sandybridge,neoverse-n1 --texts 48 [--write]

The fp32 vectors (the queries and a synthetic corpus) are computed here, natively; the
bundle's query vectors on each CPU, under qemu-user for the emulated ones
(tools/emulation.py: AVX2, AVX, Graviton2), each loaded as serve loads it, self-check
included. Per CPU: the cosine to fp32 (min, mean) and the top-10 overlap over the corpus,
with the CPU named as it described itself. ``--write`` records them in the bundle's manifest
(``fidelity_by_cpu``). Emulation computes exact results but slowly (seconds a base-tower
text under TCG; docs/cpus.md): ``--texts`` sets the query count.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from .exit_status import EXIT_CHECK_FAILED, EXIT_OK, ToolError

DEFAULT_CPUS = "native,haswell,sandybridge,neoverse-n1"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", type=Path, metavar="BUNDLE", help="the bundle to measure")
    parser.add_argument(
        "--fp32", type=Path, required=True, help="the fp32 bundle of the same checkpoint"
    )
    parser.add_argument(
        "--cpu",
        default=DEFAULT_CPUS,
        help=f"comma-separated, of native, haswell, sandybridge, neoverse-n1 ({DEFAULT_CPUS})",
    )
    parser.add_argument("--texts", type=int, default=32, help="query texts (32)")
    parser.add_argument("--corpus", type=int, default=512, help="corpus for top-10 (512)")
    parser.add_argument(
        "--min-cosine",
        type=float,
        default=None,
        help="exit 1 when a CPU's lowest cosine is below this (default: report only)",
    )
    parser.add_argument(
        "--write", action="store_true", help="record the figures in BUNDLE/manifest.json"
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per CPU (3600)")
    parser.add_argument(
        "--no-self-check",
        action="store_true",
        help="measure what each CPU computes even where init refuses the bundle (e.g. a "
        "full-range int8 bundle on AVX2); default: a refused bundle records its init error",
    )


def measure(
    bundle: Path,
    fp32: Path,
    cpus: list[str],
    *,
    texts: int,
    corpus: int,
    timeout: float | None = None,
    self_check: bool = True,
) -> dict[str, Any]:
    """``{cpu: {measured_on, cosine, top10_overlap, seconds} | {measured_on, error}}``."""
    from ..settings import load_service, load_settings
    from .emulation import embed_on, shows_own_cpuinfo, why_not
    from .parity import compare_vectors, topk_overlap
    from .texts import synthetic_captions

    for cpu in cpus:
        reason = why_not(cpu)
        if reason:
            raise ToolError(f"--cpu {cpu}: {reason}")
    queries = synthetic_captions(texts, seed=2)
    reference = load_service(load_settings(model_dir=fp32))
    fp32_queries = reference.embed_texts(queries).vectors
    items = synthetic_captions(corpus, seed=1)
    fp32_corpus = reference.embed_texts(items).vectors
    results: dict[str, Any] = {}
    for cpu in cpus:
        began = time.perf_counter()
        print(f"[fidelity] {cpu}: {texts} texts", file=sys.stderr)
        got = embed_on(cpu, bundle.resolve(), queries, timeout=timeout, self_check=self_check)
        record: dict[str, Any] = {"measured_on": got["cpu"]}
        if not self_check:
            record["self_check"] = "skipped (--no-self-check)"
        if cpu != "native":
            record["emulated"] = "qemu-user (TCG): exact results, speed not representative" + (
                "" if shows_own_cpuinfo(cpu) else "; measured_on is the host's /proc/cpuinfo"
            )
        if "error" in got:
            record["error"] = got["error"]
        else:
            import numpy as np

            ours = np.asarray(got["vectors"], dtype=np.float32)
            record["cosine"] = compare_vectors(ours, fp32_queries).as_dict()
            record["top10_overlap"] = topk_overlap(ours, fp32_queries, fp32_corpus).as_dict()
        record["seconds"] = round(time.perf_counter() - began, 1)
        results[cpu] = record
        print(f"[fidelity] {cpu}: {json.dumps(record)}", file=sys.stderr)  # as each finishes
    return results


def run(args: argparse.Namespace) -> int:
    cpus = [c.strip() for c in args.cpu.split(",") if c.strip()]
    if not (args.bundle / "manifest.json").is_file():
        raise ToolError(f"{args.bundle}: no manifest.json (not a bundle)")
    results = measure(
        args.bundle,
        args.fp32,
        cpus,
        texts=args.texts,
        corpus=args.corpus,
        timeout=args.timeout,
        self_check=not args.no_self_check,
    )
    record = {
        "reference": f"fp32 bundle {args.fp32.name}, computed natively",
        "texts": f"{args.texts} synthetic captions (seed 2), corpus {args.corpus} (seed 1)",
        "cpus": results,
    }
    print(json.dumps(record, indent=2))
    if args.write:
        path = args.bundle / "manifest.json"
        manifest = json.loads(path.read_text())
        manifest["fidelity_by_cpu"] = record
        path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    failed = [
        cpu
        for cpu, got in results.items()
        if "error" in got
        or (args.min_cosine is not None and got["cosine"]["cosine_min"] < args.min_cosine)
    ]
    if failed:
        print(
            f"siglip-text fidelity: below the bound or failed on {', '.join(failed)}",
            file=sys.stderr,
        )
        return EXIT_CHECK_FAILED
    return EXIT_OK
