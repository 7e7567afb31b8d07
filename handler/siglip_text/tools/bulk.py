"""Bulk embedding for `siglip-text embed`: batches in flight, retries, input order, resumable.

A corpus (captions, class prompts, product titles) goes through a deployment as Lambda is
built to take it: ``--concurrency N`` requests in flight, each of ``--batch-size`` inputs.

- **Requests**: one keep-alive connection per worker thread (standard library, like
  `load-test`), ``encoding_format: base64`` (4 bytes per number, as OpenAI's own client).
  The batch size defaults to the bound the server reports in ``GET /health``
  (``max_inputs_per_request``), at most `DEFAULT_BATCH_CAP`; `FALLBACK_BATCH_SIZE` if it
  reports none.
- **Retries**: 429 and 503 wait for their ``Retry-After`` (seconds or an HTTP date, at most
  `RETRY_AFTER_MAX_SECONDS`); other 5xx, 408, a timeout or a dropped connection back off
  exponentially (`BACKOFF_BASE_SECONDS` doubling to `BACKOFF_MAX_SECONDS`, with jitter); a
  batch is given up after ``--max-retries`` retries, and any other status (400, 401, 413...)
  stops the run at once with the server's message.
- **Order and resume**: batches are written in input order as they complete (a finished
  batch waits for those before it, at most `WINDOW_PER_WORKER` batches per worker ahead), each
  write flushed and ``fsync``-ed, so an interrupted run (Ctrl-C, a kill, a refusal, a lost
  machine) leaves a prefix of the output that is whole. While a run is unfinished
  ``OUT.partial.json`` (`RunRecord`) says what it belongs to: the input's digest, the model,
  the dimension. The same command started again embeds only the rest: a JSONL output resumes
  from its own lines (a partial last line is dropped; its first and last whole lines must be
  the input's), an ``.npy`` output from ``OUT.partial`` (raw float32 rows), turned into
  ``OUT`` at the end. A finished output (no record) is written again by a new run; an
  unfinished one of other work is refused; ``--restart`` discards what an earlier run wrote.
- **Progress**: a progress bar on stderr with the rate (texts/s), and a last line with the
  totals: texts, seconds, texts/s, requests and retries.
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import hashlib
import http.client
import json
import math
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from .exit_status import ToolError
from .urls import service_root

#: The batch size when the server reports no bound (a request any deployment of this project
#: answers: the template's own bound has been 64).
FALLBACK_BATCH_SIZE = 32
#: The most inputs per request by default, whatever the server allows: a larger batch
#: saves little (request fees are cents per million texts) and makes each retry costlier.
DEFAULT_BATCH_CAP = 256
DEFAULT_MAX_RETRIES = 8
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 30.0
RETRY_AFTER_MAX_SECONDS = 300.0
#: Batches a worker may run ahead of the oldest one not yet written (memory stays bounded
#: while one batch is retried).
WINDOW_PER_WORKER = 4
#: Statuses worth another attempt: throttled, overloaded, timed out, a frontend's 5xx.
RETRIED_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class EndpointError(Exception):
    """Raised when the endpoint refuses a batch, or keeps failing past the retries."""


@dataclass
class Counters:
    """What the run sent (thread-safe)."""

    requests: int = 0
    retries: int = 0
    throttled: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, *, requests: int = 0, retries: int = 0, throttled: int = 0) -> None:
        with self.lock:
            self.requests += requests
            self.retries += retries
            self.throttled += throttled


class Endpoint:
    """An OpenAI-compatible embeddings endpoint: one keep-alive connection per thread."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None,
        timeout: float = 120.0,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        base = service_root(url)
        parts = urlsplit(base)
        self.base = base
        self.scheme = parts.scheme
        self.netloc = parts.netloc
        self.path = parts.path
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.counters = Counters()
        #: Set to make every retry wait end at once (the run stops).
        self.stop = threading.Event()
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is None:
            kind = (
                http.client.HTTPSConnection
                if self.scheme == "https"
                else http.client.HTTPConnection
            )
            connection = kind(self.netloc, timeout=self.timeout)
            self._local.connection = connection
        return connection

    def _drop_connection(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None

    def send(self, method: str, path: str, body: bytes | None = None) -> tuple[int, Any, bytes]:
        """One attempt: status, headers, body. OSError or HTTPException on a transport error
        (the connection is dropped, the next attempt opens another)."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        connection = self._connection()
        try:
            connection.request(method, self.path + path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            self._drop_connection()
            raise
        if response.getheader("Connection", "").lower() == "close":
            self._drop_connection()
        return response.status, response.headers, data

    def health(self) -> dict[str, Any]:
        """``GET /health``: the model, its dimension and (when reported) the inputs bound."""
        try:
            status, _, data = self.send("GET", "/health")
        except (OSError, http.client.HTTPException) as exc:
            raise ToolError(f"{self.base}/health: cannot connect ({describe(exc)})") from None
        if status != 200:
            raise ToolError(f"{self.base}/health answered {status}: {error_message(data)}")
        try:
            found = json.loads(data)
        except ValueError:
            raise ToolError(f"{self.base}/health did not answer JSON") from None
        if not isinstance(found, dict) or not isinstance(found.get("embedding_dimension"), int):
            raise ToolError(f"{self.base}/health does not report embedding_dimension")
        return found

    def embed(self, inputs: Sequence[str], *, model: str) -> np.ndarray:
        """The unit vectors of ``inputs`` in their order, retried as the module says."""
        payload: dict[str, Any] = {"input": list(inputs), "encoding_format": "base64"}
        if model:
            payload["model"] = model
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        attempt = 0
        while True:
            if self.stop.is_set():
                raise EndpointError("stopped")
            self.counters.add(requests=1)
            try:
                status, headers, data = self.send("POST", "/v1/embeddings", body)
            except (OSError, http.client.HTTPException) as exc:
                reason, wait = describe(exc), backoff(attempt)
            else:
                if status == 200:
                    return decode_vectors(data, len(inputs))
                if status not in RETRIED_STATUSES:
                    raise EndpointError(f"HTTP {status}: {error_message(data)}")
                if status == 429:
                    self.counters.add(throttled=1)
                reason = f"HTTP {status}: {error_message(data)}"
                wait = retry_after(headers.get("Retry-After")) or backoff(attempt)
            attempt += 1
            if attempt > self.max_retries:
                raise EndpointError(f"gave up after {attempt} attempts; the last: {reason}")
            self.counters.add(retries=1)
            if self.stop.wait(wait):
                raise EndpointError("stopped")


def describe(exc: BaseException) -> str:
    """A transport error in a few words (connection refused, timed out...)."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


def error_message(data: bytes) -> str:
    """The OpenAI-shaped error's message, else the start of the body."""
    try:
        found = json.loads(data)
        message = found["error"]["message"]
        if isinstance(message, str):
            return message
    except (ValueError, KeyError, TypeError):
        pass
    return data[:200].decode("utf-8", "replace") or "(empty body)"


def backoff(attempt: int) -> float:
    """Seconds before retry ``attempt + 1`` of a failure without ``Retry-After``: doubling
    from `BACKOFF_BASE_SECONDS` to `BACKOFF_MAX_SECONDS`, half of it random so that the
    workers do not retry in step."""
    ceiling = min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * float(2 ** min(attempt, 16)))
    return ceiling * (0.5 + random.random() / 2)  # noqa: S311 (jitter, not security)


def retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """A ``Retry-After`` header in seconds (delta-seconds or an HTTP date, RFC 9110 10.2.3),
    at most `RETRY_AFTER_MAX_SECONDS`; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), RETRY_AFTER_MAX_SECONDS)
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return min(max(0.0, when - (time.time() if now is None else now)), RETRY_AFTER_MAX_SECONDS)


def decode_vectors(data: bytes, count: int) -> np.ndarray:
    """The rows of an embeddings answer in input order (``index``), base64 or float lists."""
    try:
        items = json.loads(data)["data"]
        rows: list[Any] = [None] * count
        for item in items:
            embedding = item["embedding"]
            if isinstance(embedding, str):
                embedding = np.frombuffer(base64.b64decode(embedding), dtype="<f4")
            rows[int(item["index"])] = np.asarray(embedding, dtype=np.float32)
    except (ValueError, KeyError, TypeError, IndexError, binascii.Error):
        raise EndpointError("the answer is not an embeddings list") from None
    if any(row is None for row in rows) or len(items) != count:
        raise EndpointError(f"the answer holds {len(items)} vectors for {count} inputs")
    return np.stack(rows)


# --- the outputs -------------------------------------------------------------------------------


class RunRecord:
    """``OUT.partial.json``: what an unfinished output belongs to (the input's digest, the
    model, the dimension, the number of inputs). Written when a run starts, removed when it
    finishes: an output with a record is unfinished and resumes; one without is finished
    (or not this command's) and is written again by a new run."""

    def __init__(self, out: Path, described: dict[str, Any]) -> None:
        self.path = out.with_name(out.name + ".partial.json")
        self.described = described

    def resumable(self, *, restart: bool) -> bool:
        """Whether an unfinished run of this very work is there to resume; ToolError if an
        unfinished run of other work is (``--restart`` discards it)."""
        if restart or not self.path.exists():
            return False
        try:
            found = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            found = None
        if found != self.described:
            raise ToolError(
                f"{self.path} records an unfinished run of another input, model or dimension: "
                "finish it with its own command, or pass --restart to embed everything again"
            )
        return True

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.described), encoding="utf-8")

    def finish(self) -> None:
        self.path.unlink(missing_ok=True)


class JsonlOutput:
    """JSONL: each input record with its ``embedding``, one line per input, in input order.

    An unfinished output (its `RunRecord` there) resumes from its own whole lines: a partial
    last line (a write cut short) is dropped, and its first and last whole lines must be
    this input's records with vectors of this dimension, else it is refused."""

    def __init__(
        self,
        path: Path,
        rows: Sequence[dict[str, Any]],
        *,
        record: RunRecord,
        dimension: int,
        restart: bool,
    ) -> None:
        self.path = path
        self.rows = rows
        self.record = record
        resume = record.resumable(restart=restart) and path.exists()
        self.done = self._resume(dimension) if resume else 0
        if not self.done:
            record.start()
        self._handle = path.open("ab" if self.done else "wb")

    def _resume(self, dimension: int) -> int:
        whole, lines = _whole_lines(self.path)
        with self.path.open("r+b") as handle:
            handle.truncate(whole)  # a partial last line: written again
        if not lines:
            return 0
        if lines > len(self.rows):
            raise self._foreign(f"it has {lines} lines for {len(self.rows)} inputs")
        first, last = _first_line(self.path), _last_line(self.path, whole)
        for number, line in ((0, first), (lines - 1, last)):
            try:
                record = json.loads(line)
            except ValueError:
                raise self._foreign(f"line {number + 1} is not JSON") from None
            if not isinstance(record, dict):
                raise self._foreign(f"line {number + 1} is not a record")
            embedding = record.pop("embedding", None)
            expected = {k: v for k, v in self.rows[number].items() if k != "embedding"}
            if record != expected:
                raise self._foreign(f"line {number + 1} is not input {number + 1}'s record")
            if not isinstance(embedding, list) or len(embedding) != dimension:
                raise self._foreign(f"line {number + 1} holds no {dimension}-d embedding")
        return lines

    def _foreign(self, why: str) -> ToolError:
        return ToolError(
            f"--out {self.path} was not written by this command from this input ({why}): "
            "choose another --out, or pass --restart to embed everything again"
        )

    def append(self, start: int, vectors: np.ndarray) -> None:
        lines = []
        for offset, vector in enumerate(vectors):
            record = {**self.rows[start + offset], "embedding": vector.tolist()}
            lines.append(json.dumps(record, ensure_ascii=False) + "\n")
        self._handle.write("".join(lines).encode("utf-8"))
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def finish(self) -> None:
        self.close()
        self.record.finish()

    def close(self) -> None:
        self._handle.close()


class NpyOutput:
    """``.npy``: rows go to ``OUT.partial`` (raw little-endian float32, appended and synced)
    while the run is unfinished (its `RunRecord` there); `finish` writes ``OUT`` from them
    and removes both. A resume keeps the whole rows (a partial last row is written again)."""

    def __init__(
        self, path: Path, *, record: RunRecord, count: int, dimension: int, restart: bool
    ) -> None:
        self.path = path
        self.record = record
        self.count = count
        self.dimension = dimension
        self.partial = path.with_name(path.name + ".partial")
        self.done = 0
        if record.resumable(restart=restart) and self.partial.exists():
            row = 4 * dimension
            self.done = min(self.partial.stat().st_size // row, count)
            with self.partial.open("r+b") as handle:
                handle.truncate(self.done * row)
        if not self.done:
            record.start()
        self._handle = self.partial.open("ab" if self.done else "wb")

    def append(self, start: int, vectors: np.ndarray) -> None:
        self._handle.write(np.ascontiguousarray(vectors, dtype="<f4").tobytes())
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def finish(self) -> None:
        self.close()
        rows = np.memmap(self.partial, dtype="<f4", mode="r", shape=(self.count, self.dimension))
        staged = self.path.with_name(self.path.name + ".writing.npy")
        out = np.lib.format.open_memmap(
            staged, mode="w+", dtype=np.float32, shape=(self.count, self.dimension)
        )
        step = max(1, (64 * 1024 * 1024) // (4 * self.dimension))
        for start in range(0, self.count, step):
            out[start : start + step] = rows[start : start + step]
        out.flush()
        del out, rows
        os.replace(staged, self.path)
        self.partial.unlink()
        self.record.finish()

    def close(self) -> None:
        self._handle.close()


Output = JsonlOutput | NpyOutput


def _whole_lines(path: Path) -> tuple[int, int]:
    """The byte length of the file's whole lines (up to its last newline) and their count."""
    whole = lines = 0
    offset = 0
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            lines += chunk.count(b"\n")
            last = chunk.rfind(b"\n")
            if last >= 0:
                whole = offset + last + 1
            offset += len(chunk)
    return whole, lines


def _first_line(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.readline()


def _last_line(path: Path, end: int) -> bytes:
    """The line that ends with the newline at byte ``end - 1``."""
    with path.open("rb") as handle:
        begin, position = 0, end - 1
        while position > 0:
            step = min(position, 1 << 16)
            handle.seek(position - step)
            found = handle.read(step).rfind(b"\n")
            if found >= 0:
                begin = position - step + found + 1
                break
            position -= step
        handle.seek(begin)
        return handle.read(end - begin)


def input_digest(rows: Sequence[Any]) -> str:
    """SHA-256 over the input's records (canonical JSON, each length-prefixed): what a resume
    checks it continues the same input."""
    digest = hashlib.sha256()
    for row in rows:
        encoded = json.dumps(row, sort_keys=True, ensure_ascii=False).encode(
            "utf-8", "surrogatepass"
        )
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.hexdigest()


# --- the run -----------------------------------------------------------------------------------


@dataclass
class Totals:
    """What one run did."""

    embedded: int
    skipped: int
    seconds: float


def run_batches(
    embed_batch: Callable[[Sequence[str]], np.ndarray],
    texts: Sequence[str],
    output: Output,
    *,
    batch_size: int,
    concurrency: int,
    progress: Any = None,
    stop: threading.Event | None = None,
) -> Totals:
    """Embed ``texts`` from ``output.done`` on, ``concurrency`` batches in flight, writing each
    batch in input order. An error of any batch stops the run (``stop`` is set, batches not
    begun are dropped) and is raised once the batches before it are written."""
    started = time.monotonic()
    skipped = output.done
    starts = list(range(skipped, len(texts), batch_size))
    window = max(1, concurrency) * WINDOW_PER_WORKER
    pending: dict[int, Future[np.ndarray]] = {}
    submitted = written = 0
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="embed")
    try:
        while written < len(starts):
            while submitted < len(starts) and submitted - written < window:
                begin = starts[submitted]
                pending[submitted] = pool.submit(embed_batch, texts[begin : begin + batch_size])
                submitted += 1
            vectors = pending.pop(written).result()
            output.append(starts[written], vectors)
            if progress is not None:
                progress.update(len(vectors))
            written += 1
    except BaseException as exc:
        if stop is not None:
            stop.set()
        # Batches not begun are dropped and those running end at their next attempt; their
        # answers are dropped (only this thread writes). After an error the run waits for
        # requests already sent, so that once it says it stopped no request of it is still
        # on its way; after Ctrl-C it reports at once (the exit still waits for them).
        pool.shutdown(wait=not isinstance(exc, KeyboardInterrupt), cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    embedded = sum(min(batch_size, len(texts) - begin) for begin in starts)
    return Totals(embedded=embedded, skipped=skipped, seconds=time.monotonic() - started)


def summary(totals: Totals, counters: Counters | None) -> str:
    """The run's last line (stderr): texts, time, rate, and for an endpoint its requests."""
    if not totals.embedded:
        return f"nothing to embed: all {totals.skipped} texts were already written"
    rate = totals.embedded / totals.seconds if totals.seconds > 0 else math.inf
    line = f"embedded {totals.embedded} texts in {totals.seconds:.1f} s ({rate:.1f} texts/s)"
    if totals.skipped:
        line += f", {totals.skipped} already written"
    if counters is not None:
        line += (
            f"; {counters.requests} requests, {counters.retries} retries "
            f"({counters.throttled} throttled)"
        )
    return line


def report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
