#!/usr/bin/env python3
"""Peak memory and wall time of ``siglip-text export``, per size and precision. Export extra.

    python -m benchmarks.export_memory --size so400m --tokenizer TOKENIZER_JSON
    python -m benchmarks.export_memory --size base --size so400m --precision int8
    PYTHONPATH=OTHER_CHECKOUT/handler python -m benchmarks.export_memory ...   # another version

Each export runs as a child process (``python -m siglip_text.cli export``) on the
random-weight checkpoint of ``make_full_model.py`` (built into the cache when missing), one
at a time. Two peaks are printed: ``ru_maxrss`` (what ``/usr/bin/time -v`` prints as
"Maximum resident set size": the largest single process) and the summed RSS of the process
tree sampled every 0.1 s (what the machine had to hold, should the export start helpers).
The sha256 of every bundle file is printed too, so that two versions of the exporter can
be compared byte for byte. Swap used during the run is reported: RSS leaves out what was
swapped out, so a run that swapped understates its peak.

The output is a JSON list, one record per export; ``--markdown`` adds a table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks import make_full_model

BUNDLE_FILES = ("text_model.onnx", "text_model.onnx.data", "tokenizer.json")


def meminfo(field: str) -> int:
    """One /proc/meminfo field in bytes (0 when absent)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def tree_rss(root: int) -> int:
    """Summed VmRSS of ``root`` and its descendants."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    total = 0
    for pid in tree:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def measure_export(
    checkpoint: Path, out: Path, *, size: str, precision: str, extra: tuple[str, ...] = ()
) -> dict[str, object]:
    """Run one export and return its peaks, wall time, exit status and file hashes."""
    command = make_full_model.export_command(
        checkpoint, out, precision=precision, size=size, extra=extra
    )
    print(f"[export-memory] {' '.join(command[2:])}", file=sys.stderr, flush=True)
    swap_before = meminfo("SwapTotal") - meminfo("SwapFree")
    peak = {"tree": 0, "swap": swap_before}
    done = threading.Event()
    began = time.perf_counter()
    child = subprocess.Popen(
        command, env={**os.environ, "PYTHONWARNINGS": "ignore"}, stdout=sys.stderr
    )

    def sample() -> None:
        while not done.is_set():
            peak["tree"] = max(peak["tree"], tree_rss(child.pid))
            peak["swap"] = max(peak["swap"], meminfo("SwapTotal") - meminfo("SwapFree"))
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - began
    done.set()
    sampler.join()
    child.returncode = os.waitstatus_to_exitcode(status)
    return {
        "size": size,
        "precision": precision,
        "exit_status": child.returncode,
        "wall_s": round(wall, 1),
        "peak_rss_gb": round(usage.ru_maxrss * 1024 / 1e9, 2),
        "peak_tree_rss_gb": round(peak["tree"] / 1e9, 2),
        "swap_grew_mb": round((peak["swap"] - swap_before) / 1e6),
        "bundle_mb": round(
            sum((out / n).stat().st_size for n in BUNDLE_FILES if (out / n).exists()) / 1e6, 1
        ),
        "sha256": {n: sha256(out / n) for n in BUNDLE_FILES if (out / n).exists()},
    }


def markdown(records: list[dict[str, object]]) -> str:
    lines = [
        "| size | precision | exit | wall | peak RSS (ru_maxrss) | peak tree RSS | swap grew |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['size']} | {r['precision']} | {r['exit_status']} | {r['wall_s']} s | "
            f"{r['peak_rss_gb']} GB | {r['peak_tree_rss_gb']} GB | {r['swap_grew_mb']} MB |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", action="append", choices=sorted(make_full_model.SIZES))
    parser.add_argument("--precision", action="append", choices=["fp32", "int8"])
    parser.add_argument("--cache", type=Path, default=None, help="as make_full_model.py")
    parser.add_argument(
        "--tokenizer",
        type=Path,
        default=os.environ.get("SIGLIP_BENCH_TOKENIZER") or None,
        help="a real Gemma tokenizer.json (as make_full_model.py)",
    )
    parser.add_argument("--out", type=Path, help="bundles go here (default: <cache>/memory)")
    parser.add_argument("--markdown", action="store_true", help="also print a table")
    parser.add_argument(
        "--int8-weight-form",
        choices=["int7", "int8", "uint8"],
        help="passed to export (int8: the full-range form, to compare with exports made "
        "before the 7-bit default)",
    )
    args = parser.parse_args(argv)
    cache = (args.cache or make_full_model.default_cache()).expanduser().resolve()
    records = []
    for size in args.size or ["base"]:
        name = f"siglip2-{size}-random" + ("-gemma" if args.tokenizer else "")
        checkpoint = cache / "checkpoints" / name
        if not (checkpoint / "model.safetensors").is_file():
            make_full_model.build_checkpoint(checkpoint, size, tokenizer_file=args.tokenizer)
        for precision in args.precision or ["fp32", "int8"]:
            out = (args.out or cache / "memory") / f"{name}-{precision}"
            extra = ("--int8-weight-form", args.int8_weight_form) if args.int8_weight_form else ()
            records.append(
                measure_export(checkpoint, out, size=size, precision=precision, extra=extra)
            )
            print(json.dumps(records[-1]), file=sys.stderr, flush=True)
    print(json.dumps(records, indent=2))
    if args.markdown:
        print(markdown(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
