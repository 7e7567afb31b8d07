#!/usr/bin/env python3
"""Peak memory one maximal request costs, by what its texts are made of.

    python -m benchmarks.request_memory
    python -m benchmarks.request_memory --tokenizer ../shared/fixtures/gemma-tokenizer/tokenizer.json
    PYTHONPATH=OTHER_CHECKOUT/handler python -m benchmarks.request_memory ...   # another version

Each body is 2048 texts of about 3,060 UTF-8 bytes (just under the 6 MiB body limit): emoji
(every text a distinct run of 765 four-byte characters), CJK (1,020 three-byte characters),
spaces (3,060) and ASCII words. Two measures per body, each in a fresh child process, its
peak resident set (``VmHWM``) reset just before the work, so a figure is one request's
growth over a warm process:

- ``serve``: `siglip-text serve` (the demo bundle, or ``--model-dir``) on loopback, the body
  sent to ``/v1/embeddings`` and to ``/tokenize``; with ``--concurrent N``, N copies of it
  at once, N running (``SIGLIP_MAX_CONCURRENT_REQUESTS=N``);
- ``tokenizer``: with ``--tokenizer TOKENIZER_JSON`` (the real 256k Gemma tokenizer for the
  published figures: the demo's vocabulary is 1,024 entries), that tokenizer alone, lowercasing
  put before its normalizer as export does, on the same texts, as ``/v1/embeddings``
  (`SiglipTokenizer.encode_texts`) and ``/tokenize`` (`SiglipTokenizer.tokens`) call it.

One JSON record per line: body, where, route, status, seconds, ``growth_mib``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

MIB = 1024 * 1024
TEXTS = 2048
TEXT_BYTES = 3060
EMOJI = range(0x1F300, 0x1FAFF)
CJK = range(0x4E00, 0x9FFF)
WORDS = ["a", "photo", "of", "the", "red", "cat", "on", "a", "wooden", "table", "at", "night"]


def emoji_text(i: int) -> str:
    return "".join(chr(EMOJI[(i * 7 + j) % len(EMOJI)]) for j in range(TEXT_BYTES // 4))


def cjk_text(i: int) -> str:
    return "".join(chr(CJK[(i * 13 + j) % len(CJK)]) for j in range(TEXT_BYTES // 3))


def ascii_text(i: int) -> str:
    words = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(TEXT_BYTES // 4))
    return f"{i} {words}"[:TEXT_BYTES]


def spaces_text(i: int) -> str:
    return " " * TEXT_BYTES


BODIES: dict[str, Callable[[int], str]] = {
    "emoji": emoji_text,
    "cjk": cjk_text,
    "spaces": spaces_text,
    "ascii": ascii_text,
}


def texts_of(body: str) -> list[str]:
    return [BODIES[body](i) for i in range(TEXTS)]


def status_field(pid: int | str, field: str) -> int:
    """One ``/proc/PID/status`` field in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise LookupError(field)


def reset_peak(pid: int | str) -> None:
    """VmHWM becomes the current RSS (Linux ``clear_refs`` value 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def post(port: int, path: str, body: bytes) -> tuple[int, float]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            response.read()
            status = int(response.status)
    except urllib.error.HTTPError as error:
        error.read()
        status = error.code
    return status, time.perf_counter() - start


@contextmanager
def serving(model_dir: str | None, concurrent: int = 1) -> Iterator[tuple[int, int]]:
    """A `siglip-text serve` child on a free loopback port: (pid, port), once healthy."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGLIP_")}
    env.update(SIGLIP_ORT_INTRA_OP_THREADS="1", SIGLIP_AUTH_MODE="none")
    env["SIGLIP_MAX_CONCURRENT_REQUESTS"] = str(concurrent)
    bundle = ["--model-dir", model_dir] if model_dir else ["--demo"]
    command = [sys.executable, "-m", "siglip_text.cli", "serve", *bundle, "--port", str(port)]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [*command, "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL, stderr=log
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"serve exited: {log.read().decode(errors='replace')}")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("serve did not become healthy in 120 s") from None
                    time.sleep(0.2)
            yield process.pid, port
        finally:
            process.kill()
            process.wait(timeout=30)


def through_serve(
    body: str, route: str, model_dir: str | None, concurrent: int = 1
) -> dict[str, object]:
    warm_key = "input" if route == "/v1/embeddings" else "inputs"
    payload = json.dumps({warm_key: texts_of(body)}, ensure_ascii=False).encode()
    with serving(model_dir, concurrent) as (pid, port):
        post(port, route, json.dumps({warm_key: ["warm up"] * 8}).encode())
        reset_peak(pid)
        before = status_field(pid, "VmRSS")
        with ThreadPoolExecutor(concurrent) as pool:
            answers = list(pool.map(lambda _: post(port, route, payload), range(concurrent)))
        growth = status_field(pid, "VmHWM") - before
    statuses = sorted({status for status, _ in answers})
    return {
        "body": body,
        "where": "serve",
        "route": route,
        "bytes": len(payload),
        "concurrent": concurrent,
        "status": statuses[0] if len(statuses) == 1 else statuses,
        "seconds": round(max(seconds for _, seconds in answers), 2),
        "growth_mib": round(growth / MIB, 1),
    }


def tokenizer_leg(tokenizer_json: str, body: str, route: str) -> None:
    """In the child: the tokenizer alone on one body, as ``route`` calls it."""
    from siglip_text.engine.tokenization import SiglipTokenizer
    from siglip_text.tools.checkpoint_fingerprint import served_tokenizer_data
    from tokenizers import Tokenizer

    data = json.loads(Path(tokenizer_json).read_text())
    served = Tokenizer.from_str(json.dumps(served_tokenizer_data(data, "unicode")))
    tokenizer = SiglipTokenizer(served, max_length=64)
    del data
    texts = texts_of(body)
    tokenizer.encode_texts(["warm up"] * 8)
    reset_peak("self")
    before = status_field("self", "VmRSS")
    start = time.perf_counter()
    if route == "/tokenize":
        tokenizer.tokens(texts)
    else:
        tokenizer.encode_texts(texts)
    seconds = time.perf_counter() - start
    growth = status_field("self", "VmHWM") - before
    record = {
        "body": body,
        "where": "tokenizer",
        "route": route,
        "status": None,
        "seconds": round(seconds, 2),
        "growth_mib": round(growth / MIB, 1),
    }
    print(json.dumps(record), flush=True)


def through_tokenizer(tokenizer_json: str, body: str, route: str) -> dict[str, object]:
    command = [sys.executable, "-m", "benchmarks.request_memory", "--leg", body, route]
    done = subprocess.run(
        [*command, "--tokenizer", tokenizer_json], capture_output=True, text=True, check=True
    )
    record: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", help="a tokenizer.json to measure alone (the real Gemma)")
    parser.add_argument("--model-dir", help="the bundle `serve` loads (default: the demo)")
    parser.add_argument("--body", action="append", choices=sorted(BODIES), help="repeatable")
    parser.add_argument("--no-serve", action="store_true", help="the tokenizer legs only")
    parser.add_argument("--concurrent", type=int, default=1, help="bodies sent at once to serve")
    parser.add_argument("--leg", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.leg:
        tokenizer_leg(args.tokenizer, *args.leg)
        return 0
    for body in args.body or list(BODIES):
        for route in ("/v1/embeddings", "/tokenize"):
            if not args.no_serve:
                record = through_serve(body, route, args.model_dir, args.concurrent)
                print(json.dumps(record), flush=True)
            if args.tokenizer:
                print(json.dumps(through_tokenizer(args.tokenizer, body, route)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
