"""Requests that fit: the response-size bound and the invocation's remaining time.

Two refusals, both decided before the model runs, both a 413 (``http.errors.ERRORS``): the
request asks for more than this deployment can give in one answer, and sending it again
unchanged gets the same answer, so it must be split, not retried.

- **Response size.** A frontend that buffers the answer caps its size: Lambda's synchronous
  invoke returns at most 6 MB ("Lambda quotas", "Invoke" in the Lambda API reference), and a
  larger answer is lost after all the compute. `response_bound` is the largest response the
  request can produce, from the number of inputs, the dimension and ``encoding_format``:
  base64 is exact (4 characters per 3 bytes of float32), float JSON takes the longest value
  orjson writes for a unit vector's component (16 characters, such as ``-0.0000133981575``)
  and its comma. A request over the limit is refused whatever its vectors turn out to be, so
  the same request always gets the same answer.
- **Remaining time.** `Deadline` holds the invocation's clock (the Lambda context's
  ``get_remaining_time_in_millis``). The service asks it before tokenizing, the encoder before
  each chunk of the batch: it stops the request when the rest cannot finish in the time left
  even at the best pace this process has measured, or when the next chunk at the last chunk's
  pace would run into the timeout. Lambda would otherwise end the invocation with a timeout,
  which API Gateway answers with a 5xx that OpenAI clients retry (three billed timeouts).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

from .errors import InsufficientTimeError, ResponseTooLargeError

#: Lambda's synchronous invoke response (the whole proxy response: status, headers, body):
#: 6 MB ("Lambda quotas"), counted as 6 MiB, a little under the 6,291,556 bytes that
#: Lambda's error message names for a larger answer.
LAMBDA_RESPONSE_LIMIT_BYTES = 6 * 1024 * 1024

#: The longest text orjson writes for a float32 in [-1, 1] (``-0.0000133981575``), plus its
#: comma: every component of a unit vector fits in it.
FLOAT_JSON_MAX_BYTES = 17
#: What the proxy response adds around the body (statusCode, headers, isBase64Encoded).
PROXY_ENVELOPE_BYTES = 1024


def _escaped(text: str) -> int:
    """Bytes of ``text`` once written as a JSON string value (without its quotes), with every
    non-ASCII character escaped: the most the Lambda response can spend on it."""
    return len(json.dumps(text, ensure_ascii=True)) - 2


def _vector_bytes(dimension: int, encoding: str) -> int:
    """The most one vector's payload takes in the body: base64 exactly, float at worst."""
    if encoding == "base64":
        return 2 + 4 * math.ceil(4 * dimension / 3)  # the string and its quotes
    return 2 + dimension * FLOAT_JSON_MAX_BYTES  # the brackets, each value and a comma


def response_bound(
    inputs: int, *, dimension: int, encoding: str, model: str, max_tokens: int
) -> int:
    """The largest Lambda proxy response an embeddings answer of ``inputs`` vectors can be.

    The body is a JSON string inside the proxy response, so its quotes count twice.
    """
    item = _escaped(f'{{"object":"embedding","index":{inputs},"embedding":}},')
    usage = inputs * max_tokens
    envelope = _escaped(
        f'{{"object":"list","data":[],"model":{json.dumps(model, ensure_ascii=True)},'
        f'"usage":{{"prompt_tokens":{usage},"total_tokens":{usage}}}}}'
    )
    vector = _vector_bytes(dimension, encoding) + (2 if encoding == "base64" else 0)
    return PROXY_ENVELOPE_BYTES + envelope + inputs * (item + vector)


def inputs_that_fit(
    limit: int, *, dimension: int, encoding: str, model: str, max_tokens: int
) -> int:
    """The most inputs whose answer stays within ``limit`` bytes (0 if not even one)."""
    low, high = 0, max(1, limit)
    while low < high:  # the bound grows with the count: bisect for the last that fits
        middle = (low + high + 1) // 2
        fits = (
            response_bound(
                middle, dimension=dimension, encoding=encoding, model=model, max_tokens=max_tokens
            )
            <= limit
        )
        low, high = (middle, high) if fits else (low, middle - 1)
    return low


def check_response_fits(
    inputs: int,
    *,
    limit: int | None,
    dimension: int,
    encoding: str,
    model: str,
    max_tokens: int,
) -> None:
    """Refuse (413) a request whose answer could exceed ``limit`` bytes; None: no limit."""
    if limit is None:
        return
    bound = response_bound(
        inputs, dimension=dimension, encoding=encoding, model=model, max_tokens=max_tokens
    )
    if bound <= limit:
        return
    fits = {
        name: inputs_that_fit(
            limit, dimension=dimension, encoding=name, model=model, max_tokens=max_tokens
        )
        for name in ("float", "base64")
    }
    raise ResponseTooLargeError(
        f"the answer to {inputs} inputs of dimension {dimension} as encoding_format "
        f"'{encoding}' can take up to {bound} bytes, over this endpoint's response limit of "
        f"{limit} bytes; send at most {fits['float']} inputs per request as 'float' or "
        f"{fits['base64']} as 'base64'. Retrying it unchanged gets this answer again",
        param="input",
    )


@dataclass
class Pace:
    """Seconds per input measured on this process's model: the best seen, and the last."""

    best: float | None = None
    last: float | None = None

    def record(self, seconds: float, rows: int) -> None:
        if rows <= 0:
            return
        per_row = seconds / rows
        self.last = per_row
        self.best = per_row if self.best is None else min(self.best, per_row)


@dataclass(frozen=True)
class Deadline:
    """The time one invocation has left, and what to keep of it for the answer.

    ``remaining_ms`` is the Lambda context's ``get_remaining_time_in_millis``; ``reserve_s``
    covers what follows the model: serializing the answer, Mangum, the metrics flush and the
    runtime's return of up to 6 MB.
    """

    remaining_ms: Callable[[], int]
    reserve_s: float

    def check(self, *, rows_left: int, next_rows: int, total: int, pace: Pace) -> None:
        """Raise `InsufficientTimeError` if the rows left cannot be computed in time."""
        left = self.remaining_ms() / 1000.0 - self.reserve_s
        done = total - rows_left
        cannot_finish = left <= 0 or (pace.best is not None and rows_left * pace.best > left)
        next_overruns = pace.last is not None and next_rows * pace.last > left
        if not (cannot_finish or next_overruns):
            return
        need = rows_left * (pace.best or 0.0)
        where = "before the model ran" if done == 0 else f"after {done} of {total} inputs"
        raise InsufficientTimeError(
            f"this request cannot finish within the invocation's time limit: it stopped "
            f"{where}, with {max(left, 0.0):.2f} s left for at least {need:.2f} s of work; "
            "split it into smaller requests (retrying it unchanged is likely to stop again)",
            param="input",
        )
