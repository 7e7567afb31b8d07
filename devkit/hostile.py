"""Hostile requests for the fuzz tests, and the one property every answer must satisfy.

Each strategy yields a `Hostile` request labelled with its kind, so a test can show that every
kind was actually tried. Giant values are built from a small generated seed repeated to a
sampled size (Hypothesis cannot generate megabytes itself). The property, `check_answer`: a
200 carries valid embeddings, right in number, order and value, and anything else is a 4xx in
OpenAI's error shape with a short, escaped message; never a 5xx.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from siglip_text.engine.service import EmbeddingService

from devkit.openai_shapes import assert_openai_error, assert_openai_response, decode_base64

MODEL_ID = "siglip-text/synthetic-demo-tiny"
VOCAB_SIZE = 990  # the demo tokenizer's; tests check it against the service
#: The statuses a hostile request may get (401: auth on; 429: admission full).
CLIENT_ERRORS = {400, 401, 404, 405, 413, 429}
#: An error message is a short, escaped summary, never a copy of the input.
MAX_MESSAGE_CHARS = 320


def fuzz_settings(examples: int) -> settings:
    """A fixed number of examples from a fixed seed, the same on every run."""
    return settings(FUZZ_SETTINGS, max_examples=examples)


FUZZ_SETTINGS = settings(
    derandomize=True,  # a fixed seed: the same examples on every run
    database=None,
    deadline=None,  # hangs are caught by `hang_guard`, not by timing each example
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)


@dataclass(frozen=True)
class Hostile:
    """One request: what kind of hostility, the raw body and the headers that go with it."""

    kind: str
    body: bytes
    content_type: str | None = "application/json"
    headers: tuple[tuple[str, str], ...] = ()

    def header_dict(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.content_type is not None:
            headers["content-type"] = self.content_type
        return headers


@dataclass
class Tally:
    """What a fuzz run tried and got back."""

    kinds: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    vectors_checked: int = 0

    @property
    def requests(self) -> int:
        return sum(self.kinds.values())

    def summary(self, name: str) -> str:
        return (
            f"TRIED {name}: {self.requests} requests, "
            f"statuses {dict(sorted(self.statuses.items()))}, "
            f"{self.vectors_checked} vectors checked, kinds {dict(sorted(self.kinds.items()))}"
        )


# --- JSON values ---------------------------------------------------------------------------

SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
CONTROL = st.characters(max_codepoint=0x1F) | st.sampled_from(["\x7f", "\x85", "\u2028", "\ufeff"])
ANY_TEXT = st.text(max_size=24)
HOSTILE_TEXT = st.lists(
    st.one_of(ANY_TEXT, SURROGATE, CONTROL, st.sampled_from(["\x00", " ", "🐱", "İ", "\u0301"])),
    max_size=6,
).map("".join)
BIG_INTS = st.sampled_from(
    [-1, -(2**31), 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, -(10**30)]
)
NUMBERS = st.one_of(
    st.integers(),
    BIG_INTS,
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e308, -1e308, 5e-324, 1.0, 32.0]),
)
JSON_LEAF = st.one_of(st.none(), st.booleans(), NUMBERS, HOSTILE_TEXT)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(HOSTILE_TEXT, inner, max_size=3),
    max_leaves=12,
)
TOKEN_ID = st.one_of(st.integers(0, VOCAB_SIZE - 1), st.integers(-3, VOCAB_SIZE + 3), BIG_INTS)
TEXTS = st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=5)
OPTIONAL_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from([MODEL_ID, "text-embedding-3-small", ""]) | JSON_VALUE,
        "encoding_format": st.sampled_from(["float", "base64", "binary", "FLOAT"]) | JSON_VALUE,
        "dimensions": st.sampled_from([32, 16, 0, -32]) | NUMBERS | JSON_VALUE,
        "user": HOSTILE_TEXT | JSON_VALUE,
        "extra": JSON_VALUE,
    },
)
CONTENT_TYPES = st.sampled_from(
    [
        None,
        "application/json",
        "application/json; charset=utf-8",
        "application/json; charset=latin-1",
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=xyz",
        "application/octet-stream",
        "image/png",
        "*/*",
        "",
        "application/json; charset=\u00ff\u00fe",
    ]
)


def dumps(value: Any, *, ascii_only: bool = True) -> bytes:
    """JSON as a client would send it; lone surrogates become invalid UTF-8 when not escaped."""
    text = json.dumps(value, ensure_ascii=ascii_only, allow_nan=True)
    return text.encode("utf-8", "surrogatepass")


def _with_fields(fields: dict[str, Any], **values: Any) -> dict[str, Any]:
    return {**fields, **values}


# --- one strategy per kind of hostility ----------------------------------------------------


@st.composite
def wrong_types(draw: st.DrawFn) -> Hostile:
    body = draw(OPTIONAL_FIELDS)
    if draw(st.booleans()):
        body["input"] = draw(JSON_VALUE)
    top: Any = body if draw(st.integers(0, 5)) else draw(JSON_VALUE)
    return Hostile("wrong_types", dumps(top))


@st.composite
def nulls(draw: st.DrawFn) -> Hostile:
    keys = draw(st.sets(st.sampled_from(["input", "model", "encoding_format", "dimensions"])))
    texts = draw(TEXTS)
    body: dict[str, Any] = {"input": texts, **dict.fromkeys(keys)}
    if draw(st.booleans()):
        body["input"] = [None, *texts] if draw(st.booleans()) else [[1, None]]
    return Hostile("nulls", b"null" if not keys and draw(st.booleans()) else dumps(body))


@st.composite
def numbers(draw: st.DrawFn) -> Hostile:
    where = draw(st.sampled_from(["input", "ids", "dimensions", "digits"]))
    if where == "digits":  # integers longer than Python's 4300-digit conversion limit
        digits = b"9" * draw(st.sampled_from([20, 4300, 4301, 50_000]))
        sign = draw(st.sampled_from([b"", b"-"]))
        raw = draw(st.sampled_from([b'{"input":[%s]}', b'{"input":"x","dimensions":%s}']))
        return Hostile("numbers", raw % (sign + digits))
    value = draw(NUMBERS)
    body: dict[str, Any] = {"input": "x"}
    if where == "input":
        body["input"] = value
    elif where == "ids":
        body["input"] = [draw(TOKEN_ID), value]
    else:
        body["dimensions"] = value
    return Hostile("numbers", dumps(body))


@st.composite
def deep_nesting(draw: st.DrawFn) -> Hostile:
    depth = draw(st.sampled_from([2, 3, 64, 500, 990, 1_000, 5_000, 100_000]))
    opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
    nested = opener * depth + b"1" + closer * depth
    where = draw(st.sampled_from([b'{"input":%s}', b'{"input":"x","extra":%s}', b"%s"]))
    if draw(st.booleans()):  # unbalanced: opened and never closed
        nested = opener * depth
    return Hostile("deep_nesting", where % nested)


@st.composite
def arrays(draw: st.DrawFn) -> Hostile:
    count = draw(st.sampled_from([0, 1, 2, 63, 2_047, 2_048, 2_049, 100_000]))
    element = draw(
        st.sampled_from(["text", "ids", "id", "empty-text", "empty-ids", "mixed", "objects"])
    )
    item: Any = {
        "text": draw(st.text(min_size=1, max_size=8)),
        "ids": [draw(st.integers(0, VOCAB_SIZE - 1))],
        "id": draw(st.integers(0, VOCAB_SIZE - 1)),
        "empty-text": "",
        "empty-ids": [],
        "mixed": "a",
        "objects": {},
    }[element]
    values = [item] * count
    if element == "mixed" and count:
        values[-1] = 7  # one wrong item at the very end of a long array
    return Hostile("arrays", dumps({"input": values}))


@st.composite
def giant_strings(draw: st.DrawFn) -> Hostile:
    seed = draw(st.text(min_size=1, max_size=6)) or "a"
    size = draw(st.sampled_from([1_100, 70_000, 1_000_000, 2_000_000]))
    giant = (seed * (size // len(seed) + 1))[:size]
    where = draw(st.sampled_from(["input", "list", "model", "user", "key", "encoding_format"]))
    body = _holding(giant, where, listed=[giant, "a short one", giant[: size // 3]])
    return Hostile("giant_strings", dumps(body, ascii_only=draw(st.booleans())))


def _holding(value: str, where: str, *, listed: list[str]) -> dict[str, Any]:
    """A request body with ``value`` at ``where``: as the input, in a list of inputs
    (``listed``), as a key of its own, or as another field's value."""
    body: dict[str, Any] = {"input": "x"}
    if where == "input":
        body["input"] = value
    elif where == "list":
        body["input"] = listed
    elif where == "key":
        body[value] = 1
    else:
        body[where] = value
    return body


@st.composite
def invalid_utf8(draw: st.DrawFn) -> Hostile:
    body = bytearray(dumps({"input": draw(TEXTS)}, ascii_only=False))
    how = draw(st.sampled_from(["insert", "latin-1", "overlong", "cesu", "bom", "utf-16"]))
    if how == "insert":
        at = draw(st.integers(0, len(body)))
        body[at:at] = draw(st.binary(min_size=1, max_size=4).filter(_not_utf8))
    elif how == "latin-1":
        body = bytearray(b'{"input": "caf\xe9 cr\xe8me"}')
    elif how == "overlong":
        body = bytearray(b'{"input": "\xc0\xaf\xe0\x80\xaf"}')
    elif how == "cesu":  # a surrogate pair encoded as two 3-byte sequences
        body = bytearray(b'{"input": "\xed\xa0\xbd\xed\xb8\x80"}')
    elif how == "bom":
        body[0:0] = b"\xef\xbb\xbf"
    else:
        body = bytearray(json.dumps({"input": draw(TEXTS)}).encode("utf-16"))
    return Hostile("invalid_utf8", bytes(body))


def _not_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


@st.composite
def lone_surrogates(draw: st.DrawFn) -> Hostile:
    surrogate = draw(SURROGATE)
    text = draw(ANY_TEXT) + surrogate + draw(ANY_TEXT)
    where = draw(st.sampled_from(["input", "list", "long", "model", "key", "user", "pair"]))
    if where == "long":  # past the tokenizer's prefix window
        body = {"input": "a cat " * 400 + text}
    elif where == "pair":  # a valid pair, escaped: this one is fine Unicode
        body = {"input": "\U0001f431 " + text.replace(surrogate, "")}
    else:
        body = _holding(text, where, listed=["fine", text])
    return Hostile("lone_surrogates", dumps(body, ascii_only=draw(st.booleans())))


@st.composite
def control_chars(draw: st.DrawFn) -> Hostile:
    text = "".join(draw(st.lists(CONTROL | st.sampled_from(["a", " "]), min_size=1, max_size=40)))
    if draw(st.booleans()):  # escaped, as JSON requires
        return Hostile("control_chars", dumps({"input": [text, "a" + text]}))
    raw = '{"input": "' + text.replace('"', "").replace("\\", "") + '"}'  # raw: invalid JSON
    return Hostile("control_chars", raw.encode("utf-8"))


@st.composite
def token_ids(draw: st.DrawFn) -> Hostile:
    ids = draw(st.lists(TOKEN_ID, min_size=1, max_size=80))
    shape = draw(st.sampled_from(["one", "many", "long"]))
    value: Any = ids
    if shape == "many":
        value = [ids, draw(st.lists(TOKEN_ID, min_size=1, max_size=5))]
    elif shape == "long":
        value = [draw(st.integers(0, VOCAB_SIZE - 1))] * 100_000 + [draw(TOKEN_ID)]
    return Hostile("token_ids", dumps(_with_fields(draw(OPTIONAL_FIELDS), input=value)))


@st.composite
def content_types(draw: st.DrawFn) -> Hostile:
    body = {"input": draw(TEXTS)}
    raw = draw(
        st.sampled_from([dumps(body), b"input=a+cat", b"--xyz\r\n\r\na cat\r\n--xyz--", b"\x89PNG"])
    )
    return Hostile("content_types", raw, content_type=draw(CONTENT_TYPES))


@st.composite
def truncated_json(draw: st.DrawFn) -> Hostile:
    whole = dumps(_with_fields(draw(OPTIONAL_FIELDS), input=draw(TEXTS)), ascii_only=False)
    cut = draw(st.integers(0, len(whole) - 1))
    return Hostile("truncated_json", whole[:cut])


@st.composite
def valid(draw: st.DrawFn) -> Hostile:
    """Requests the contract accepts: their answers are checked vector by vector."""
    value: Any = draw(
        st.one_of(
            st.text(min_size=1, max_size=40),
            TEXTS,
            st.lists(st.integers(0, VOCAB_SIZE - 1), min_size=1, max_size=70),
            st.lists(
                st.lists(st.integers(0, VOCAB_SIZE - 1), min_size=1, max_size=5), max_size=4
            ).filter(bool),
        )
    )
    body: dict[str, Any] = {"input": value}
    if draw(st.booleans()):
        body["model"] = MODEL_ID
    if draw(st.booleans()):
        body["encoding_format"] = draw(st.sampled_from(["float", "base64"]))
    if draw(st.booleans()):
        body["dimensions"] = 32
    if draw(st.booleans()):
        body["user"] = draw(st.text(max_size=10))
    return Hostile("valid", dumps(body, ascii_only=draw(st.booleans())))


@st.composite
def content_length(draw: st.DrawFn) -> Hostile:
    """Bogus Content-Length headers (a real server's HTTP parser refuses most of them)."""
    value = draw(st.sampled_from(["-1", "1e3", "0x10", "²", "٣", " 12", "9" * 5_000, "9" * 11]))
    return Hostile("content_length", dumps({"input": "x"}), headers=(("content-length", value),))


#: Every kind of hostile request, each a strategy of its own so that a run can try each
#: kind the same number of times.
KINDS: dict[str, Callable[[], st.SearchStrategy[Hostile]]] = {
    "wrong_types": wrong_types,
    "nulls": nulls,
    "numbers": numbers,
    "deep_nesting": deep_nesting,
    "arrays": arrays,
    "giant_strings": giant_strings,
    "invalid_utf8": invalid_utf8,
    "lone_surrogates": lone_surrogates,
    "control_chars": control_chars,
    "token_ids": token_ids,
    "content_types": content_types,
    "truncated_json": truncated_json,
    "valid": valid,
    "content_length": content_length,
}


# --- the property --------------------------------------------------------------------------


def expected_inputs(body: bytes) -> list[str] | list[list[int]] | None:
    """The inputs a 200 must answer, in order; None when the body is not a JSON object."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or "input" not in data:
        return None
    raw = data["input"]
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and raw and isinstance(raw[0], int):
        return [raw]
    return raw if isinstance(raw, list) else None


def check_answer(
    request: Hostile,
    status: int,
    headers: dict[str, str],
    content: bytes,
    *,
    service: EmbeddingService,
    tally: Tally,
    compare_rows: int = 3,
) -> None:
    """The property: valid embeddings in order, or a 4xx in OpenAI's shape; never a 5xx."""
    tally.kinds[request.kind] += 1
    tally.statuses[status] += 1
    assert status < 500, (request.kind, request.body[:200], status, content[:300])
    assert headers.get("content-type", "").startswith("application/json"), headers
    body = json.loads(content)
    if status == 200:
        assert request.kind != "truncated_json", request.body[:200]
        check_embeddings(request.body, body, service=service, tally=tally, rows=compare_rows)
        return
    assert status in CLIENT_ERRORS, (status, body)
    assert_openai_error(body)
    message = body["error"]["message"]
    assert len(message) <= MAX_MESSAGE_CHARS and message.isascii(), message[:400]


def check_embeddings(
    request_body: bytes, body: dict[str, Any], *, service: EmbeddingService, tally: Tally, rows: int
) -> None:
    inputs = expected_inputs(request_body)
    assert inputs, request_body[:200]
    data = body["data"]
    # OpenAI's schema on the envelope and a few items (all 2048 would cost seconds); the
    # count, order and norms of every item are checked below.
    assert_openai_response({**body, "data": data[:2] + data[-1:]})
    assert body["model"] == service.model_id
    assert [item["index"] for item in data] == list(range(len(inputs)))
    vectors = np.stack([_vector(item["embedding"]) for item in data])
    assert vectors.shape == (len(inputs), service.dimension)
    norms = np.linalg.norm(vectors, axis=1)
    assert np.all(np.abs(norms - 1) < 1e-5) and math.isfinite(float(norms.sum()))
    # Right vector in the right place: the first, last and middle rows against the engine.
    picks = sorted({0, len(inputs) - 1, len(inputs) // 2})[:rows]
    chosen = [inputs[i] for i in picks]
    if isinstance(chosen[0], str):
        expected = service.embed_texts(chosen).vectors  # type: ignore[arg-type]
    else:
        expected = service.embed_token_ids(chosen).vectors  # type: ignore[arg-type]
    np.testing.assert_allclose(vectors[picks], expected, atol=1e-5)
    tally.vectors_checked += len(inputs)


def _vector(embedding: list[float] | str) -> np.ndarray:
    if isinstance(embedding, str):
        return decode_base64(embedding).astype(np.float64)
    return np.asarray(embedding, dtype=np.float64)


# --- calling the app --------------------------------------------------------------------


# --- API Gateway events --------------------------------------------------------------------
