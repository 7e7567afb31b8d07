"""Lowercasing, defined once: the choices, the Python functions and the tokenizer normalizer.

The checkpoints were trained on lowercased text. ``unicode`` is Python's ``str.lower``
(final sigma included); ``ascii`` maps A-Z only, as big_vision's ``tf.strings.lower``;
``none`` keeps the text. Export writes the chosen one into ``tokenizer.json`` as a normalizer
(`lowercase_normalizer`, built from `lowercase_normalizer_json`); the reference side applies
it in Python (`lower_text`).
"""

from __future__ import annotations

import json
import string
from typing import TYPE_CHECKING, Any

from ..engine.bundle import Lowercase

if TYPE_CHECKING:
    from tokenizers import normalizers

LOWERCASE_CHOICES: tuple[Lowercase, ...] = ("unicode", "ascii", "none")

#: Python's ``str.lower`` maps a capital sigma to the final form when it ends a word
#: (Unicode's Final_Sigma context: a cased letter before it, none after it, case-ignorable
#: characters skipped); the ``Lowercase`` normalizer maps every sigma to the medial form.
_CASED = r"[\p{Cased}&&\P{Case_Ignorable}]"
FINAL_SIGMA = rf"(?<={_CASED}\p{{Case_Ignorable}}*)Σ(?!\p{{Case_Ignorable}}*{_CASED})"

_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def ascii_lower(text: str) -> str:
    """A-Z to a-z only, as big_vision's ``tf.strings.lower``."""
    return text.translate(_ASCII_LOWER)


def lower_text(text: str, mode: Lowercase) -> str:
    """The Python lowercasing a GPU pipeline applies before the tokenizer."""
    if mode == "unicode":
        return text.lower()
    if mode == "ascii":
        return ascii_lower(text)
    if mode == "none":
        return text
    raise ValueError(f"lowercase must be one of {LOWERCASE_CHOICES}, got {mode!r}")


def lowercase_normalizer_json(mode: Lowercase) -> dict[str, Any] | None:
    """The lowercasing as ``tokenizer.json`` writes the normalizer (None for ``none``): the
    one definition, which `lowercase_normalizer` builds and a checkpoint's fingerprint
    (tools/checkpoint_fingerprint.py) puts before the checkpoint's own normalizer, as export
    does."""
    if mode == "unicode":
        steps: list[dict[str, Any]] = [
            {"type": "Replace", "pattern": {"Regex": FINAL_SIGMA}, "content": "ς"},
            {"type": "Lowercase"},
        ]
    elif mode == "ascii":
        steps = [
            {"type": "Replace", "pattern": {"String": upper}, "content": upper.lower()}
            for upper in string.ascii_uppercase
        ]
    elif mode == "none":
        return None
    else:
        raise ValueError(f"lowercase must be one of {LOWERCASE_CHOICES}, got {mode!r}")
    return {"type": "Sequence", "normalizers": steps}


def lowercase_normalizer(mode: Lowercase) -> normalizers.Normalizer | None:
    """The same lowercasing as a ``tokenizers`` normalizer (None for ``none``).

    ``unicode`` equals ``str.lower`` (final sigma included) for every character the two
    Unicode versions (Python's and the Rust library's) both know.
    """
    from tokenizers import Tokenizer

    steps = lowercase_normalizer_json(mode)
    if steps is None:
        return None
    empty = {
        "version": "1.0",
        "normalizer": steps,
        "model": {"type": "BPE", "vocab": {}, "merges": []},
    }
    built: normalizers.Normalizer | None = Tokenizer.from_str(json.dumps(empty)).normalizer
    assert built is not None
    return built
