"""The protocol between `run.py` and its legs: each leg runs as its own process,

    python -m benchmarks.workers KIND --threads N --runs N --allow-spinning true|false \\
        --batches 1,8,32 [--bundle-dir DIR] [--vectors-out FILE] [--floor-dir DIR] \\
        [--checkpoint DIR]

(a clean import and init, its own peak RSS), with the repository and ``handler/`` on its
path and none of the caller's ``SIGLIP_*`` variables, and prints its figures as one JSON
object on the last line of its stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_worker(kind: str, args: argparse.Namespace, **extra: str) -> dict[str, Any]:
    """Run leg ``kind`` in its own process with the legs' settings of ``args``; its figures."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.workers",
        kind,
        "--threads",
        str(args.threads),
        "--runs",
        str(args.runs),
        "--allow-spinning",
        args.allow_spinning,
        "--batches",
        ",".join(map(str, args.batches)),
    ]
    for key, value in extra.items():
        command += [f"--{key.replace('_', '-')}", value]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGLIP_")}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(ROOT / "handler"), env.get("PYTHONPATH", "")]
    )
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} worker failed:\n{done.stderr[-4000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def worker_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The worker's side of `run_worker`: its command line, batches as a list of ints."""
    parser = argparse.ArgumentParser(description="one leg of benchmarks/run.py (run by it)")
    parser.add_argument("kind", choices=["ort", "torch", "floor"])
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--allow-spinning", choices=["true", "false"], required=True)
    parser.add_argument("--batches", required=True)
    parser.add_argument("--bundle-dir")
    parser.add_argument("--vectors-out")
    parser.add_argument("--floor-dir")
    parser.add_argument("--checkpoint")
    args = parser.parse_args(argv)
    args.batches = [int(b) for b in str(args.batches).split(",")]
    return args
