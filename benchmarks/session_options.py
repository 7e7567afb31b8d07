#!/usr/bin/env python3
"""Side-by-side checks behind two defaults: ORT thread spinning, and external weights.

    python -m benchmarks.session_options --bundle ~/.cache/siglip-text/bench/bundles/v2-base-fp32

1. Spinning: two sessions of the same graph, spinning off and on, run alternately in one
   process (so machine noise hits both alike), with an idle gap between runs as between
   requests. Prints median wall time and CPU time per query, and the CPU burned while idle.
2. Weights: the session's load time and the process's peak RSS, each in a fresh process, for
   the bundle's graph as it is and re-saved as one file (weights inside the protobuf).

Needs the `onnx` package for part 2 (in the test and export extras).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def session(path: Path, *, threads: int, spinning: bool) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def compare_spinning(graph: Path, *, threads: int, runs: int, gap_s: float) -> None:
    sessions = {
        "off": session(graph, threads=threads, spinning=False),
        "on": session(graph, threads=threads, spinning=True),
    }
    feeds = {"input_ids": np.random.default_rng(0).integers(4, 300, (1, 64)).astype(np.int64)}
    wall: dict[str, list[float]] = {k: [] for k in sessions}
    cpu: dict[str, list[float]] = {k: [] for k in sessions}
    for s in sessions.values():
        s.run(None, feeds)
    for _ in range(runs):
        for name, s in sessions.items():
            began, began_cpu = time.perf_counter(), time.process_time()
            s.run(None, feeds)
            wall[name].append(time.perf_counter() - began)
            cpu[name].append(time.process_time() - began_cpu)
            time.sleep(gap_s)
    for name, s in sessions.items():
        s.run(None, feeds)
        began_cpu = time.process_time()
        time.sleep(0.2)
        idle = time.process_time() - began_cpu
        print(
            f"spinning {name:3s}: median {np.median(wall[name]) * 1000:8.2f} ms wall, "
            f"{np.median(cpu[name]) * 1000:8.2f} ms CPU per query; "
            f"{idle * 1000:6.1f} ms CPU burned in 200 ms idle after a run"
        )
    ratio = np.median(wall["on"]) / np.median(wall["off"])
    print(f"spinning on / off (wall, median): {ratio:.3f}")


LOAD = """
import json, sys, time
import onnxruntime as ort
options = ort.SessionOptions()
options.intra_op_num_threads = int(sys.argv[2])
began = time.perf_counter()
ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
load_s = time.perf_counter() - began
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the parent's memory.
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
print(json.dumps({"load_s": load_s, "peak_rss_mb": int(hwm) / 1024}))
"""


def compare_weights(graph: Path, *, threads: int) -> None:
    import onnx

    with tempfile.TemporaryDirectory(prefix="single-file-", dir=graph.parent) as scratch:
        single = Path(scratch) / graph.name
        onnx.save_model(onnx.load(str(graph)), str(single))
        for label, path in (("as exported", graph), ("one file", single)):
            done = subprocess.run(
                [sys.executable, "-c", LOAD, str(path), str(threads)],
                capture_output=True,
                text=True,
                check=True,
            )
            figures = json.loads(done.stdout)
            size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 2**20
            print(
                f"{label:12s}: session load {figures['load_s']:.3f} s, peak RSS "
                f"{figures['peak_rss_mb']:.0f} MB, files {size:.0f} MiB"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bundle", type=Path, required=True, help="bundle directory")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--gap-ms", type=float, default=20.0, help="idle time between runs")
    parser.add_argument("--skip-weights", action="store_true", help="only the spinning part")
    args = parser.parse_args()
    graph = args.bundle.expanduser() / "text_model.onnx"
    compare_spinning(graph, threads=args.threads, runs=args.runs, gap_s=args.gap_ms / 1000)
    if not args.skip_weights:
        compare_weights(graph, threads=args.threads)


if __name__ == "__main__":
    main()
