"""The lowercasing written into tokenizer.json equals the Python a GPU pipeline runs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from siglip_text.tools.lowercase import ascii_lower, lowercase_normalizer

# Letters whose lowercasing depends on context or differs between libraries, plus cased
# and case-ignorable neighbours (apostrophes, combining marks, soft hyphen, modifiers).
ALPHABET = list("ΣσςΑαΒβ AbZ.'’:-1\t") + [
    "\u0301",
    "\u00ad",
    "\u200d",
    "\u02b0",
    "\u0345",
    "ǅ",
    "İ",
    "É",
]


@pytest.mark.parametrize(
    "text",
    ["ΟΔΟΣ", "ΣΊΣΥΦΟΣ ΟΔΟΣ.", "Σ", "ΑΣ'Σ", "ΑΣ\u0301", "İstanbul", "CAFÉ Crème", "ǅ"],
)
def test_unicode_lowercasing_equals_str_lower_including_final_sigma(text: str) -> None:
    normalizer = lowercase_normalizer("unicode")
    assert normalizer is not None

    assert normalizer.normalize_str(text) == text.lower()


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=12))
def test_unicode_lowercasing_equals_str_lower_on_sigma_heavy_text(text: str) -> None:
    normalizer = lowercase_normalizer("unicode")
    assert normalizer is not None

    assert normalizer.normalize_str(text) == text.lower()


def test_ascii_lowercasing_leaves_other_letters_alone() -> None:
    normalizer = lowercase_normalizer("ascii")
    assert normalizer is not None

    assert normalizer.normalize_str("CAFÉ ΟΔΟΣ Über") == ascii_lower("CAFÉ ΟΔΟΣ Über")
    assert normalizer.normalize_str("CAFÉ ΟΔΟΣ Über") == "cafÉ ΟΔΟΣ Über"


def test_no_lowercasing_writes_no_normalizer() -> None:
    assert lowercase_normalizer("none") is None
