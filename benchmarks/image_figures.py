#!/usr/bin/env python3
"""Init time, warm latency and size of the function image, run as Lambda runs it.

    python -m benchmarks.image_figures --bundle handler/siglip_text/demo
    python -m benchmarks.image_figures --bundle ~/.cache/siglip-text/bench/bundles/siglip2-base-random-gemma-fp32

Builds handler/Dockerfile with the bundle (a copy of the package, the lock and the bundle as
the build context; the dependency layer comes from the Docker cache when it is there), runs
the image `--network none --read-only --tmpfs /tmp --user 993:990` with the template's
AuthMode=none environment, and sends one event to AWS's Runtime Interface Emulator inside the
container (`docker exec`), then the same event `--warm` times. Prints, as JSON: the emulator's
INIT REPORT (the init phase: imports, bundle load, probe), the first invoke's round trip, the
median and p90 of the warm round trips (emulator included) and of the handler's own
`Duration` from the REPORT lines, and the image size. Needs a Docker engine and a base image
tagged public.ecr.aws/lambda/python:3.13 (AWS's, or scripts/make_standin_base_image.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INVOKE = """
import json, sys, time, urllib.error, urllib.request
URL = "http://127.0.0.1:8080/2015-03-31/functions/function/invocations"
body, times = sys.stdin.read().encode(), []
deadline = time.monotonic() + 30
for _ in range(int(sys.argv[1])):
    while True:
        start = time.perf_counter()
        try:
            urllib.request.urlopen(urllib.request.Request(URL, data=body), timeout=300).read()
            break
        except urllib.error.URLError as error:
            if time.monotonic() > deadline or not isinstance(error.reason, ConnectionRefusedError):
                raise
            time.sleep(0.05)
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def docker(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["docker", *args], input=stdin, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"docker {args[0]} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def link_tree(source: Path, target: Path) -> None:
    """Hard links where possible (a base bundle is 1.2 GB), copies otherwise."""
    target.mkdir(parents=True)
    for path in source.iterdir():
        if path.is_file():
            try:
                os.link(path, target / path.name)
            except OSError:
                shutil.copy2(path, target / path.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--event", type=Path, default=ROOT / "events" / "rest-embeddings-text.json")
    parser.add_argument("--warm", type=int, default=50)
    args = parser.parse_args()

    from siglip_text.engine.bundle import load_manifest

    from devkit.events import for_model  # the event, asking for the bundle's model
    from devkit.sam import resolve, translate

    model = load_manifest(args.bundle / "manifest.json").repository
    event = json.dumps(for_model(json.loads(args.event.read_text()), model))
    cfn = translate({"AuthMode": "none"})
    function = cfn["Resources"]["SiglipTextFunction"]  # (the other, the deploy hook, a zip)
    env = resolve(cfn, function["Properties"]["Environment"]["Variables"], {"AuthMode": "none"})

    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp)
        shutil.copytree(
            ROOT / "handler" / "siglip_text",
            context / "handler" / "siglip_text",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        (context / "scripts").mkdir()
        shutil.copy2(ROOT / "scripts" / "check_bundle_files.py", context / "scripts")
        (context / "layers" / "python").mkdir(parents=True)
        shutil.copy2(ROOT / "layers" / "python" / "requirements.txt", context / "layers" / "python")
        shutil.copy2(ROOT / ".dockerignore", context)
        link_tree(args.bundle, context / "layers" / "bundle")
        tag = "siglip-text-figures:latest"
        started = time.perf_counter()
        docker(
            "build",
            "--quiet",
            "--network=host",
            "-f",
            str(ROOT / "handler" / "Dockerfile"),
            "--build-arg=MODEL_DIR=layers/bundle",
            "-t",
            tag,
            str(context),
        )
        build_s = time.perf_counter() - started

    flags = [f"--env={k}={v}" for k, v in env.items()]
    container = docker(
        "run",
        "--detach",
        "--network=none",
        "--read-only",
        "--tmpfs=/tmp",
        "--user=993:990",
        *flags,
        tag,
    ).strip()
    try:
        (first,) = json.loads(
            docker("exec", "-i", container, "python3", "-c", INVOKE, "1", stdin=event)
        )
        warm = json.loads(
            docker("exec", "-i", container, "python3", "-c", INVOKE, str(args.warm), stdin=event)
        )
        logs = subprocess.run(["docker", "logs", container], capture_output=True, text=True)
        text = logs.stdout + logs.stderr
    finally:
        subprocess.run(["docker", "rm", "--force", container], capture_output=True)
    # the same handler in-process on this machine, right after (the machine is noisy: the
    # ratio of the two is the figure to read, not either alone)
    from devkit.lambda_context import LambdaContext

    os.environ.update(
        {
            "SIGLIP_AUTH_MODE": "none",
            "POWERTOOLS_TRACE_DISABLED": "true",
            **{k: str(v) for k, v in env.items()},
            "SIGLIP_MODEL_DIR": str(args.bundle),
            "SIGLIP_ORT_INTRA_OP_THREADS": str(os.cpu_count()),
        }
    )
    from siglip_text import lambda_function  # its init, with the template's environment

    lambda_function.handler(json.loads(event), LambdaContext())
    host = []
    for _ in range(args.warm):
        started = time.perf_counter()
        lambda_function.handler(json.loads(event), LambdaContext())
        host.append((time.perf_counter() - started) * 1000)
    host.sort()
    durations = [
        float(d)
        for d in re.findall(
            r"REPORT RequestId: \S+\s+(?:Init Duration: [0-9.]+ ms\s+)?Duration: ([0-9.]+) ms", text
        )
    ]
    warm_ms = sorted(t * 1000 for t in warm)
    handler_ms = sorted(durations[1:])
    size = json.loads(docker("image", "inspect", tag))[0]["Size"]
    print(
        json.dumps(
            {
                "bundle": str(args.bundle),
                "model": model,
                "image_mb": round(size / 1e6, 1),
                "build_s": round(build_s, 1),
                "init_report_ms": float(
                    re.findall(r"INIT REPORT\(durationMs: ([0-9.]+)\)", text)[0]
                ),
                "first_invoke_round_trip_ms": round(first * 1000, 1),
                "warm_round_trip_ms": {
                    "median": round(statistics.median(warm_ms), 2),
                    "p90": round(warm_ms[int(0.9 * len(warm_ms)) - 1], 2),
                    "n": len(warm_ms),
                },
                "warm_handler_duration_ms": {
                    "median": round(statistics.median(handler_ms), 2),
                    "p90": round(handler_ms[int(0.9 * len(handler_ms)) - 1], 2),
                }
                if handler_ms
                else None,
                "host_in_process_handler_ms": {
                    "median": round(statistics.median(host), 2),
                    "p90": round(host[int(0.9 * len(host)) - 1], 2),
                },
                "container_over_host_median": round(
                    statistics.median(warm_ms) / statistics.median(host), 2
                ),
                "cpus": os.cpu_count(),
                "load_average": os.getloadavg(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
