"""`siglip-text load-test`: an HTTP load generator for any /v1/embeddings endpoint.

Seed 001's benchmark script as a tool: a local `siglip-text serve` or an API Gateway URL.
Standard library only (one keep-alive connection per worker thread), so it runs anywhere
the package is installed. Reports throughput, mean/median/p99 latency and status counts
(429s apart), why requests failed (connection refused, timeout, the status and the error's
message), and writes them as JSON.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import ssl
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .texts import CAPTION_WORDS as WORDS
from .urls import service_root


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        default="http://127.0.0.1:8000",
        help="the endpoint's base URL, with or without /v1 (default http://127.0.0.1:8000)",
    )
    parser.add_argument("--requests", type=int, default=200, help="measured requests")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=10, help="requests sent before measuring")
    parser.add_argument("--input", choices=["text", "tokens"], default="text")
    parser.add_argument("--batch", type=int, default=1, help="inputs per request")
    parser.add_argument("--model", default=None, help="model field (default: omitted)")
    parser.add_argument("--encoding-format", choices=["float", "base64"], default="float")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("SIGLIP_API_KEY"),
        help="sent as Authorization: Bearer (default: $SIGLIP_API_KEY)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    parser.add_argument("--json", dest="json_path", default=None, help="write results here")


#: How many distinct failure reasons the report keeps (the rest are counted as "other").
MAX_REASONS = 8


@dataclass
class Outcome:
    status: int  # 0 for a transport error
    latency_s: float
    reason: str | None = None  # why it failed; None for a 200


def status_reason(status: int, phrase: str, body: bytes) -> str:
    """``404 model_not_found: The model ...``: the status and the OpenAI error it carries."""
    try:
        error = json.loads(body)["error"]
        code = error.get("code") or error.get("type")
        message = str(error.get("message", "")).strip()
    except (ValueError, KeyError, TypeError, AttributeError):
        text = body[:120].decode("utf-8", "replace").strip()
        return f"{status} {phrase}" + (f": {text}" if text else "")
    label = f"{status} {code}" if code else f"{status} {phrase}"
    return f"{label}: {message[:200]}" if message else label


def transport_reason(exc: BaseException, *, timeout: float) -> str:
    """A transport failure in words: what a user checks first (server down, too slow, DNS)."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is the server running at this host and port?)"
    if isinstance(exc, TimeoutError):
        return f"timeout: no answer within {timeout:g} s (--timeout)"
    if isinstance(exc, socket.gaierror):
        return f"host not found ({exc.strerror or exc})"
    if isinstance(exc, ssl.SSLError):
        return f"TLS error ({exc.reason or exc})"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(exc, ConnectionResetError):
        return "connection reset by the server"
    return f"{type(exc).__name__}: {exc}"


@dataclass
class Report:
    url: str
    requests: int
    concurrency: int
    batch: int
    input: str
    duration_s: float
    statuses: dict[str, int]
    latencies_ms: list[float] = field(repr=False)
    failures: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        ok = self.latencies_ms
        return {
            "url": self.url,
            "requests": self.requests,
            "concurrency": self.concurrency,
            "batch": self.batch,
            "input": self.input,
            "duration_s": round(self.duration_s, 4),
            "throughput_rps": round(len(ok) / self.duration_s, 3) if self.duration_s else 0.0,
            "successful": len(ok),
            "throttled_429": self.statuses.get("429", 0),
            "statuses": self.statuses,
            "failures": self.failures,
            "latency_ms": {
                "mean": round(statistics.fmean(ok), 3) if ok else None,
                "median": round(statistics.median(ok), 3) if ok else None,
                "p99": round(percentile(ok, 99), 3) if ok else None,
                "min": round(min(ok), 3) if ok else None,
                "max": round(max(ok), 3) if ok else None,
            },
        }


def percentile(values: list[float], percent: float) -> float:
    """Linear interpolation between closest ranks (as numpy's default)."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * percent / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def payload(index: int, *, kind: str, batch: int, model: str | None, encoding: str) -> bytes:
    """A distinct, deterministic request body (distinct so a cache cannot flatter results)."""
    if kind == "text":
        inputs: list[Any] = [
            f"{WORDS[(index + i) % len(WORDS)]} {WORDS[(index * 7 + i) % len(WORDS)]} "
            f"number {index}-{i}"
            for i in range(batch)
        ]
    else:
        inputs = [[10 + (index + i + j) % 200 for j in range(12)] for i in range(batch)]
    body: dict[str, Any] = {"input": inputs, "encoding_format": encoding}
    if model:
        body["model"] = model
    return json.dumps(body).encode()


class _Worker(threading.local):
    connection: http.client.HTTPConnection | None = None


def run_load(args: argparse.Namespace) -> Report:
    root = service_root(args.url)
    target = urlsplit(root)
    path = target.path + "/v1/embeddings"
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = f"Bearer {args.api_key}"
    local = _Worker()

    def connect() -> http.client.HTTPConnection:
        kind = (
            http.client.HTTPSConnection if target.scheme == "https" else http.client.HTTPConnection
        )
        return kind(target.hostname or "127.0.0.1", target.port, timeout=args.timeout)

    def send(index: int) -> Outcome:
        body = payload(
            index,
            kind=args.input,
            batch=args.batch,
            model=args.model,
            encoding=args.encoding_format,
        )
        started = time.perf_counter()
        for attempt in (1, 2):  # one reconnect if the server closed the kept-alive socket
            if local.connection is None:
                local.connection = connect()
            try:
                local.connection.request("POST", path, body=body, headers=headers)
                response = local.connection.getresponse()
                content = response.read()
                elapsed = time.perf_counter() - started
                if response.status == 200:
                    return Outcome(200, elapsed)
                reason = status_reason(response.status, response.reason, content)
                return Outcome(response.status, elapsed, reason)
            except (OSError, http.client.HTTPException) as exc:
                local.connection.close()
                local.connection = None
                if attempt == 2:
                    reason = transport_reason(exc, timeout=args.timeout)
                    return Outcome(0, time.perf_counter() - started, reason)
        raise AssertionError("unreachable")

    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        list(pool.map(send, range(args.warmup)))
        began = time.perf_counter()
        outcomes = list(pool.map(send, range(args.warmup, args.warmup + args.requests)))
        duration = time.perf_counter() - began
    statuses = Counter(str(o.status) if o.status else "error" for o in outcomes)
    reasons = Counter(o.reason for o in outcomes if o.reason)
    failures = dict(reasons.most_common(MAX_REASONS))
    if len(reasons) > MAX_REASONS:
        failures["other"] = sum(reasons.values()) - sum(failures.values())
    return Report(
        url=root,
        requests=args.requests,
        concurrency=args.concurrency,
        batch=args.batch,
        input=args.input,
        duration_s=duration,
        statuses=dict(sorted(statuses.items())),
        latencies_ms=[o.latency_s * 1000 for o in outcomes if o.status == 200],
        failures=failures,
    )


def run(args: argparse.Namespace) -> int:
    if args.requests < 1 or args.concurrency < 1 or args.batch < 1 or args.warmup < 0:
        print("load-test: --requests, --concurrency and --batch must be >= 1", file=sys.stderr)
        return 2
    summary = run_load(args).summary()
    lat = summary["latency_ms"]
    print(f"url          {summary['url']}")
    print(
        f"requests     {summary['requests']} (concurrency {summary['concurrency']}, "
        f"batch {summary['batch']}, {summary['input']})"
    )
    print(
        f"successful   {summary['successful']}   429s {summary['throttled_429']}   "
        f"statuses {summary['statuses']}"
    )
    print(
        f"duration     {summary['duration_s']:.2f} s   "
        f"throughput {summary['throughput_rps']:.2f} req/s"
    )
    for reason, count in summary["failures"].items():
        print(f"failed       {count:>4} x {reason}")
    if lat["mean"] is not None:
        print(
            f"latency ms   mean {lat['mean']:.2f}   median {lat['median']:.2f}   "
            f"p99 {lat['p99']:.2f}"
        )
    if args.json_path:
        with open(args.json_path, "w") as handle:
            json.dump(summary, handle, indent=2)
    return 0 if summary["successful"] else 1
