#!/usr/bin/env python3
"""Two checkouts side by side: the Lambda entry point's init time and its per-request cost.

    git worktree add /tmp/base <commit>
    python -m benchmarks.entry_point_ab /tmp/base . --rounds 8

Each round runs both checkouts once, in fresh processes, in alternating order (A B, then B A,
...), so a drift of the machine's speed reaches both alike. A process imports
``siglip_text.lambda_function`` from its checkout (the init, as Lambda runs it: demo bundle,
auth mode none, tracing off, one ONNX Runtime thread), then calls ``handler`` with two
events of ``events/``: after a warm-up, the median of ``--calls`` calls each. Printed: each
figure's median, min and max over the rounds, and B's median over A's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

#: The events timed per request: an embedding through the REST API, and the cheapest answer.
EVENTS = ("rest-embeddings-text.json", "url-health.json")

_CHILD = r"""
import json, os, sys, time
began = time.perf_counter()
import siglip_text.lambda_function as entry
init_s = time.perf_counter() - began
from devkit.lambda_context import LambdaContext
tree, calls, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
result = {"init_s": init_s, "module": entry.__file__}
shown, sys.stdout = sys.stdout, open(os.devnull, "w")  # Powertools' metric lines
for name in names:
    event = json.loads(open(os.path.join(tree, "events", name)).read())
    for _ in range(max(1, calls // 10)):
        entry.handler(event, LambdaContext())
    samples = []
    for _ in range(calls):
        began = time.perf_counter()
        answer = entry.handler(event, LambdaContext())
        samples.append(time.perf_counter() - began)
        assert answer["statusCode"] == 200, answer
    result[name] = sorted(samples)[len(samples) // 2]
sys.stdout = shown
print("RESULT " + json.dumps(result))
"""


def measure(tree: Path, calls: int) -> dict[str, float]:
    """One fresh process of ``tree``: its init seconds and each event's median seconds."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("SIGLIP_", "POWERTOOLS_"))
    }
    environment.update(
        PYTHONPATH=f"{tree / 'handler'}{os.pathsep}{tree}",
        SIGLIP_MODEL_DIR=str(tree / "handler" / "siglip_text" / "demo"),
        SIGLIP_AUTH_MODE="none",
        SIGLIP_ORT_INTRA_OP_THREADS="1",
        POWERTOOLS_TRACE_DISABLED="true",
        POWERTOOLS_LOG_LEVEL="WARNING",
    )
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tree), str(calls), *EVENTS],
        env=environment,
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{tree}: exit {done.returncode}\n{done.stderr[-3000:]}")
    result = json.loads(lines[0].removeprefix("RESULT "))
    if not str(result.pop("module")).startswith(str(tree)):
        raise SystemExit(f"{tree}: the entry point was imported from another checkout")
    return {name: float(value) for name, value in result.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path, help="checkout A (e.g. a worktree of the base)")
    parser.add_argument("b", type=Path, help="checkout B (e.g. this one)")
    parser.add_argument("--rounds", type=int, default=8, help="processes per checkout")
    parser.add_argument("--calls", type=int, default=300, help="timed calls per event")
    args = parser.parse_args(argv)
    trees = {"A": args.a.resolve(), "B": args.b.resolve()}
    runs: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    for round_ in range(args.rounds):
        for label in ("A", "B") if round_ % 2 == 0 else ("B", "A"):
            runs[label].append(measure(trees[label], args.calls))
    print(f"A = {trees['A']}\nB = {trees['B']}\n{args.rounds} rounds, alternating\n")
    print("| figure | A median (min-max) | B median (min-max) | B / A |")
    print("|---|---|---|---|")
    for figure, unit, scale in (
        ("init_s", "ms", 1e3),
        (EVENTS[0], "us", 1e6),
        (EVENTS[1], "us", 1e6),
    ):
        a = [run[figure] * scale for run in runs["A"]]
        b = [run[figure] * scale for run in runs["B"]]
        print(
            f"| {figure} ({unit}) | {statistics.median(a):.0f} ({min(a):.0f}-{max(a):.0f}) "
            f"| {statistics.median(b):.0f} ({min(b):.0f}-{max(b):.0f}) "
            f"| {statistics.median(b) / statistics.median(a):.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
