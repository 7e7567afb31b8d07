"""The response-size bound: a request whose answer could not pass the frontend is refused
before the model runs.

A frontend that buffers the answer caps its size: Lambda's synchronous invoke returns at most
6 MB ("Lambda quotas", "Invoke" in the Lambda API reference), and a larger answer is lost
after all the compute. `response_bound` is the largest Lambda proxy response the request can
produce, from the number of inputs, the dimension and ``encoding_format``: base64 is exact
(4 characters per 3 bytes of float32), float JSON takes the longest value orjson writes for a
unit vector's component (16 characters, such as ``-0.0000133981575``) and its comma. A request
over the limit is refused (`ResponseTooLargeError`, a 413) whatever its vectors turn out to
be, so the same request always gets the same answer: it must be split, not retried.

This is the HTTP layer's knowledge of how its answers travel (a JSON string inside Lambda's
proxy response); the engine computes vectors and knows nothing of it.
"""

from __future__ import annotations

import json
import math

from .errors import ResponseTooLargeError

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
