"""A count of the values a JSON body holds, from its bytes, whose own cost is bounded.

`structure_outside_strings` counts the separators and containers (``,`` ``[`` ``{``) that lie
outside the body's strings: with one added, at least as many as the values (array items,
object members) parsing would make. It is how a body is refused (413) before orjson makes a
Python object of each value, so it must not cost what parsing would: it reads the body in
windows of `WINDOW` bytes with numpy, keeping between windows only whether a string is open
and whether a backslash is pending, so that its memory is a small multiple of `WINDOW` (about
1 MiB) whatever the body holds, and no Python object is made per value or per string.

A quotation mark opens or closes a string unless an odd run of backslashes comes right
before it (JSON's only escape of a quote); an unterminated string runs to the end of the
body. Outside strings a valid body has no backslash, so a body this reads differently from
a parser is not valid JSON: whatever it counts there, parsing refuses the body at that point.
"""

from __future__ import annotations

import numpy as np

#: Bytes read at a time: the count's memory is a small multiple of this, not of the body.
WINDOW = 64 * 1024

_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_COMMA, _BRACKET, _BRACE = ord(","), ord("["), ord("{")


def structure_outside_strings(body: bytes) -> int:
    """The ``,`` ``[`` and ``{`` of ``body`` outside its strings (see the module docstring)."""
    if b'"' not in body:
        return body.count(b",") + body.count(b"[") + body.count(b"{")
    data = np.frombuffer(body, dtype=np.uint8)
    count = 0
    inside = False  # a string is open where the window starts
    backslashes = 0  # the run of backslashes that ends where the window starts
    for start in range(0, len(data), WINDOW):
        window = data[start : start + WINDOW]
        escaped = _escaped(window, backslashes)
        quotes = (window == _QUOTE) & ~escaped
        # A byte is inside a string when an odd number of quotes (and the state carried in)
        # come before it; a separator is never a quote, so the running parity up to and
        # including it is its own.
        parity = np.bitwise_xor.accumulate(quotes.view(np.uint8))
        outside = parity == (1 if inside else 0)
        structural = (window == _COMMA) | (window == _BRACKET) | (window == _BRACE)
        count += int(np.count_nonzero(structural & outside))
        if len(parity) and parity[-1]:
            inside = not inside
        backslashes = _trailing_backslashes(window, backslashes)
    return count


def _escaped(window: np.ndarray, carried: int) -> np.ndarray:
    """For each byte, whether an odd run of backslashes comes right before it (``carried``:
    the run that ended the window before)."""
    n = len(window)
    is_backslash = window == _BACKSLASH
    if not carried and not is_backslash.any():
        return np.zeros(n, dtype=bool)
    positions = np.arange(n, dtype=np.int32)
    # The last byte at or before each position that is not a backslash (-1: none in window).
    last_other = np.maximum.accumulate(np.where(is_backslash, -1, positions))
    run = positions - last_other  # the backslashes ending at each position
    run = np.where(last_other < 0, run + carried, run)
    escaped = np.empty(n, dtype=bool)
    if n:
        escaped[0] = carried % 2 == 1
        escaped[1:] = run[:-1] % 2 == 1
    return escaped


def _trailing_backslashes(window: np.ndarray, carried: int) -> int:
    """The run of backslashes that ends ``window`` (with ``carried``, if it is all of them)."""
    others = np.flatnonzero(window != _BACKSLASH)
    if not len(others):
        return carried + len(window)
    return len(window) - 1 - int(others[-1])
