#!/usr/bin/env python3
"""Peak memory a body refused by its count costs: the worst bodies for the pre-parse count.

    python -m benchmarks.count_memory
    python -m benchmarks.count_memory --where lambda --body "empty strings"
    PYTHONPATH=OTHER_CHECKOUT/handler python -m benchmarks.count_memory   # another version

Each body is just under 6 MiB (the default ``SIGLIP_MAX_REQUEST_BYTES``) of the values that
cost the most per byte: empty strings (``{"input": ["", "", ...]}``, about 2.1 million),
one-character strings, nested empty arrays, numbers, strings full of separators, escaped
quotes, an array opened 6 million times, and whitespace. Each is sent to ``/v1/embeddings``
and to ``/tokenize``; ``status`` says how it was answered (413 ``too_many_inputs`` when its
count is over the bound). Two places, each in a fresh child process whose peak resident set
(``VmHWM``) is reset after a warm-up request, so a figure is one request's growth:

- ``serve``: `siglip-text serve --demo` on loopback (`benchmarks.request_memory.serving`);
- ``lambda``: the Lambda handler built in-process as its init builds it, the body in an API
  Gateway REST proxy event (the event's own copy of the body counts: Lambda hands the
  function a string).

One JSON record per line: body, where, route, status, seconds, ``growth_mib``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.request_memory import MIB, post, reset_peak, serving, status_field

BODY_BYTES = 6 * MIB - 1024
ROUTES = {"/v1/embeddings": "input", "/tokenize": "inputs"}


def _array(item: bytes) -> Callable[[str], bytes]:
    def body(key: str) -> bytes:
        head, tail = b'{"' + key.encode() + b'": [', b"]}"
        n = (BODY_BYTES - len(head) - len(tail)) // (len(item) + 1)
        return head + b",".join([item] * n) + tail

    return body


BODIES: dict[str, Callable[[str], bytes]] = {
    "empty strings": _array(b'""'),
    "one-character strings": _array(b'"a"'),
    "nested empty arrays": _array(b"[]"),
    "numbers": _array(b"1"),
    "strings of separators": _array(b'",[{"'),
    "escaped quotes": lambda key: (
        b'{"' + key.encode() + b'": "' + b'\\"' * (BODY_BYTES // 2 - 16) + b'"}'
    ),
    "opened arrays": lambda key: b"[" * BODY_BYTES,
    "whitespace": lambda key: b" " * BODY_BYTES,
}


def through_serve(name: str, route: str) -> dict[str, object]:
    body = BODIES[name](ROUTES[route])
    with serving(None) as (pid, port):
        post(port, route, json.dumps({ROUTES[route]: ["warm up"] * 8}).encode())
        reset_peak(pid)
        before = status_field(pid, "VmRSS")
        status, seconds = post(port, route, body)
        growth = status_field(pid, "VmHWM") - before
    return _record(name, "serve", route, status, seconds, growth, len(body))


def rest_event(route: str, body: str) -> dict[str, object]:
    from devkit.events import EVENTS

    event: dict[str, object] = json.loads((EVENTS / "rest-embeddings-text.json").read_text())
    event.update(path=route, resource=route, body=body, isBase64Encoded=False)
    return event


def lambda_leg(name: str, route: str) -> None:
    """In the child: the Lambda handler in-process, one body through it."""
    import os

    os.environ.update(
        SIGLIP_ORT_INTRA_OP_THREADS="1",
        SIGLIP_AUTH_MODE="none",
        POWERTOOLS_TRACE_DISABLED="true",
        POWERTOOLS_METRICS_NAMESPACE="SiglipTextBenchmark",
    )
    os.environ.setdefault("SIGLIP_MODEL_DIR", str(_demo_dir()))
    import logging

    from siglip_text.assembly import assemble_lambda
    from siglip_text.settings import load_settings

    from devkit.lambda_context import LambdaContext

    function = assemble_lambda(load_settings(), os.environ)
    logging.disable(logging.CRITICAL)  # the 413's log line is not what is measured
    warm = json.dumps({ROUTES[route]: ["warm up"] * 8})
    function.handler(rest_event(route, warm), LambdaContext())
    text = BODIES[name](ROUTES[route]).decode()
    event = rest_event(route, text)
    del text
    # What the body's making freed goes back to the system, so the request cannot reuse it
    # unseen (glibc keeps freed heap otherwise).
    import ctypes

    ctypes.CDLL("libc.so.6").malloc_trim(0)
    reset_peak("self")
    before = status_field("self", "VmRSS")
    start = time.perf_counter()
    answer = function.handler(event, LambdaContext())
    seconds = time.perf_counter() - start
    growth = status_field("self", "VmHWM") - before
    length = len(str(event["body"]))
    record = _record(name, "lambda", route, answer["statusCode"], seconds, growth, length)
    print(json.dumps(record), flush=True)


def through_lambda(name: str, route: str) -> dict[str, object]:
    command = [sys.executable, "-m", "benchmarks.count_memory", "--leg", name, route]
    root = Path(__file__).resolve().parents[1]  # where `benchmarks` imports from
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=root)
    record: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return record


def _demo_dir() -> Path:
    from siglip_text.settings import demo_model_dir

    return demo_model_dir()


def _record(
    name: str, where: str, route: str, status: int, seconds: float, growth: int, size: int
) -> dict[str, object]:
    return {
        "body": name,
        "where": where,
        "route": route,
        "bytes": size,
        "status": status,
        "seconds": round(seconds, 2),
        "growth_mib": round(growth / MIB, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--body", action="append", choices=sorted(BODIES), help="repeatable")
    parser.add_argument("--where", choices=["serve", "lambda"], action="append")
    parser.add_argument("--route", choices=sorted(ROUTES), action="append")
    parser.add_argument("--leg", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.leg:
        lambda_leg(*args.leg)
        return 0
    for name in args.body or list(BODIES):
        for route in args.route or list(ROUTES):
            for where in args.where or ["serve", "lambda"]:
                leg = through_serve if where == "serve" else through_lambda
                print(json.dumps(leg(name, route)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
