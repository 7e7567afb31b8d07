#!/usr/bin/env python3
"""SnapStart, emulated with CRIU: the snapshot's size and the first request after a restore,
with the before-snapshot warm-up and without it, beside a plain cold start.

    sudo .venv/bin/python -m benchmarks.snapstart_restore --bundle /path/to/bundle [--restores 3]

For one bundle, each in a fresh function process (devkit/snapstart_function.py, the
Lambda handler under ``AWS_LAMBDA_INITIALIZATION_TYPE=snap-start``, AuthMode=none, 2 ORT
threads as at 3538 MB):

- cold: the init (process start to listening) and the first request, no snapshot;
- no warm-up: the initialized process checkpointed as it is, restored ``--restores`` times
  from the one image, each timing its first request and a second one;
- warm-up: the before-snapshot hooks run, then the same, each restore running the
  after-restore hooks (timed) before its first request.

``first_extra_median_ms`` is the median, over the restores, of the first request's time less
the second's in the same process: what a first request costs beyond a warm one, steadier on
a loaded machine than either figure alone.

Prints JSON: RSS after init (what Lambda snapshots and charges the cache for is the
environment's memory; RSS is the process's part), the CRIU image size, and the request
durations measured inside the process (the handler call). Needs root and the criu root
(scripts/make_criu_root.sh, SIGLIP_CRIU_ROOT). What CRIU does not emulate: Firecracker
restores memory lazily (pages fault in from the snapshot on first touch), CRIU eagerly; so
these first requests are Python's cold paths only, not the page faults.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from devkit.snapstart_emulation import (
    FunctionProcess,
    criu_dump,
    criu_restore,
    criu_unavailable,
    function_env,
)

TEXT = "a photo of a red sports car parked by the sea"


def event() -> dict[str, Any]:
    body = json.dumps({"input": TEXT})
    return {
        "resource": "/v1/embeddings",
        "path": "/v1/embeddings",
        "httpMethod": "POST",
        "headers": {"content-type": "application/json", "host": "bench"},
        "multiValueHeaders": {"content-type": ["application/json"], "host": ["bench"]},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "requestContext": {"requestId": "bench", "stage": "bench", "httpMethod": "POST"},
        "body": body,
        "isBase64Encoded": False,
    }


def timed(function: FunctionProcess) -> float:
    answer = function.call("invoke", event=event())
    assert answer["result"]["statusCode"] == 200, answer
    return float(answer["seconds"]) * 1000


def image_mb(images: Path) -> float:
    return sum(p.stat().st_size for p in images.iterdir()) / 2**20


def cold(env: dict[str, str], work: Path) -> dict[str, Any]:
    function = FunctionProcess(env, work)
    began = time.perf_counter()
    function.start()
    init_s = time.perf_counter() - began
    try:
        first = timed(function)
        second = timed(function)
        rss = function.call("rss")["rss_mb"]
    finally:
        function.stop()
    return {
        "init_s": round(init_s, 3),
        "first_ms": round(first, 2),
        "second_ms": round(second, 2),
        "rss_after_init_mb": round(rss, 1),
    }


def snapshot(env: dict[str, str], work: Path, *, warm_up: bool, restores: int) -> dict[str, Any]:
    function = FunctionProcess(env, work)
    function.start()
    images = work / "images"
    try:
        if warm_up:
            assert function.call("before_snapshot") == {"ok": True}
        rss = function.call("rss")["rss_mb"]
        criu_dump(function.pid, images)
        firsts, seconds, hooks = [], [], []
        for _ in range(restores):
            restorer = criu_restore(images)
            try:
                if warm_up:
                    hooks.append(function.call("timed_after_restore")["seconds"] * 1000)
                firsts.append(timed(function))
                seconds.append(timed(function))
            finally:
                function.stop()
                restorer.wait(timeout=60)
        return {
            "rss_at_snapshot_mb": round(rss, 1),
            "criu_image_mb": round(image_mb(images), 1),
            "after_restore_hooks_ms": [round(t, 1) for t in hooks],
            "first_ms": [round(t, 2) for t in firsts],
            "first_median_ms": round(statistics.median(firsts), 2),
            "second_median_ms": round(statistics.median(seconds), 2),
            # what the first request costs beyond a warm one, in the same restored process:
            # steadier than either alone on a shared machine
            "first_extra_median_ms": round(
                statistics.median(f - s for f, s in zip(firsts, seconds, strict=True)), 2
            ),
        }
    finally:
        function.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--restores", type=int, default=3)
    parser.add_argument("--threads", default="2")
    args = parser.parse_args()
    reason = criu_unavailable()
    if reason is not None:
        print(f"CRIU cannot run here: {reason}", file=sys.stderr)
        return 2
    env = function_env(args.bundle.resolve(), SIGLIP_ORT_INTRA_OP_THREADS=args.threads)
    report: dict[str, Any] = {"bundle": str(args.bundle), "threads": int(args.threads)}
    for name in ("cold", "no_warm_up", "warm_up"):
        work = Path(tempfile.mkdtemp(prefix=f"snapstart-{name}-"))
        try:
            if name == "cold":
                report[name] = cold(env, work)
            else:
                report[name] = snapshot(
                    env, work, warm_up=name == "warm_up", restores=args.restores
                )
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(json.dumps({name: report[name]}), file=sys.stderr)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
