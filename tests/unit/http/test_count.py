"""The pre-parse count (`http.count`, behind `schemas.json_items`): the values a body holds,
at a memory cost of a few MiB whatever the body, and the same count a string-aware scan
makes."""

from __future__ import annotations

import json
import random
import re
import tracemalloc
from collections.abc import Callable

import pytest
from siglip_text.http.count import WINDOW, structure_outside_strings
from siglip_text.http.schemas import json_items, json_items_at_most

MIB = 1024 * 1024
BODY_BYTES = 6 * MIB

# The scan the count replaced: strings (escapes included, an unterminated one to the end)
# emptied by a regular expression, then the separators counted. Right, and costly.
_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.?)*+(?:"|\Z)', re.DOTALL)


def reference(body: bytes) -> int:
    emptied = _JSON_STRING.sub(b'""', body)
    return emptied.count(b",") + emptied.count(b"[") + emptied.count(b"{")


def worst_bodies() -> dict[str, Callable[[], tuple[bytes, int]]]:
    """About 6 MiB each, of the values that cost parsing the most per byte, with the count of
    their separators and containers outside strings."""

    def array(item: bytes, own: int = 0) -> Callable[[], tuple[bytes, int]]:
        n = BODY_BYTES // (len(item) + 1)
        return lambda: (b'{"input": [' + b",".join([item] * n) + b"]}", 2 + (n - 1) + n * own)

    return {
        "empty strings": array(b'""'),
        "one-character strings": array(b'"a"'),
        "nested empty arrays": array(b"[]", own=1),
        "deep empty arrays": lambda: (b"[" * BODY_BYTES, BODY_BYTES),
        "numbers": array(b"1"),
        "strings of separators": array(b'",[{"'),
        "escaped quotes": lambda: (b'{"input": "' + b'\\"' * (BODY_BYTES // 2) + b'"}', 1),
        "whitespace": lambda: (b" " * BODY_BYTES, 0),
    }


@pytest.mark.parametrize("name", list(worst_bodies()))
def test_counting_a_worst_body_allocates_a_few_mib(name: str) -> None:
    body, structure = worst_bodies()[name]()
    # WHEN the body is counted, under tracemalloc (numpy reports its buffers to it)
    tracemalloc.start()
    try:
        count = json_items(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # THEN the count is right and its peak is a small fraction of the body (the regex
    # substitution it replaced peaked at about 60 times the body, 360 MiB for 6 MiB)
    assert count == structure + 1
    assert peak < 4 * MIB, f"{name}: {peak / MIB:.1f} MiB"


def random_body(rng: random.Random, items: int) -> bytes:
    """Separators and values outside strings, strings full of separators and escapes (a
    backslash outside a string is not JSON: a parser refuses the body there), the last
    string left open at random."""
    inside = [b",", b"[", b"{", b"a", b"\\\\", b'\\"', b"\\n", b"]"]
    outside = [b",", b"[", b"{", b"]", b"}", b"1", b" ", b":"]
    pieces = []
    for _ in range(items):
        if rng.random() < 0.4:
            pieces.append(b'"' + b"".join(rng.choices(inside, k=rng.randrange(8))) + b'"')
        else:
            pieces.append(rng.choice(outside))
    if rng.random() < 0.3:
        pieces.append(b'"' + b"".join(rng.choices(inside, k=rng.randrange(8))))
    return b"".join(pieces)


@pytest.mark.parametrize("seed", range(40))
def test_the_count_equals_a_string_aware_scan_on_random_bodies(seed: int) -> None:
    # GIVEN random bodies, some long enough to cross windows at random places
    rng = random.Random(seed)
    body = random_body(rng, rng.choice([10, 1000, WINDOW // 4 + rng.randrange(99)]))
    # THEN the count is the scan's
    assert structure_outside_strings(body) == reference(body)


def test_runs_of_backslashes_across_a_window_edge_are_carried() -> None:
    for run in range(1, 6):
        for shift in range(-3, 3):
            body = b'"' + b"a" * (WINDOW - 1 - run + shift) + b"\\" * run + b'",[' + b'"x,"'
            assert structure_outside_strings(body) == reference(body), (run, shift)


def test_json_bodies_count_their_values() -> None:
    body = json.dumps({"input": ["a, b, [c]", 'say \\"x, y\\"', ""], "model": "m"}).encode()
    assert json_items(body) == reference(body) + 1 == 6  # { [ , , , and one
    assert json_items_at_most(body, 6) and not json_items_at_most(body, 5)
