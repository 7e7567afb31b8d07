"""The texts the tools share: the contract's edge cases and a synthetic caption grammar.

Standard library only (``load_generator`` imports it). `MAX_LENGTH` is the contract's token length.
Export checks every bundle on `EDGE_CASE_TEXTS`;
the int8 fidelity corpus, the benchmarks and ``bench`` use `synthetic_captions` and
`CAPTION_WORDS`.
"""

from __future__ import annotations

import random

#: The SigLIP 2 contract's token length: 63 content ids, then <eos>, then <pad> up to it
#: (export writes it as every bundle's ``text_max_token_length``).
MAX_LENGTH = 64

#: The texts every export is checked on: edge cases of the contract (empty, whitespace,
#: case, accents, final sigma, CJK, RTL, emoji, control characters, past 64 tokens, and
#: special-token strings, which are text).
EDGE_CASE_TEXTS = [
    "a photo of a cat",
    "this is a photo of a dog.",
    "",
    " ",
    "   \t\n  ",
    "A Photo Of A CAT",
    "Café Crème BRÛLÉE, naïve façade",
    "ÉCOLE Über STRASSE",
    "İstanbul ΣΊΣΥΦΟΣ ΟΔΟΣ",
    "一只猫的照片",
    "東京の夜景の写真",
    "고양이 사진",
    "صورة قطة على الطاولة",
    "תמונה של חתול",
    "🐱🚀 emoji 👩‍👩‍👧 ZWJ family 🇯🇵",
    "control\x00chars\x07and\x1bescape\x7f",
    "tab\tseparated\tand\nnew\r\nlines",
    "e\u0301 combining acute vs é precomposed",
    "punctuation!!! ??? ... (brackets) [more] {braces} \"quotes\" 'single'",
    "numbers 0123456789 3.14159 1,000,000",
    " ".join(["a red block and a robot arm on the kitchen table"] * 12),
    "supercalifragilisticexpialidocious" * 8,
    "x" * 500,
    "🐱" * 80,
    "a photo of a <eos> cat <pad> on a <bos> mat",
    "<eos>",
    "<unk><mask>",
]

#: Special-token strings: in a text they are text (the contract; SentencePiece never makes
#: a control symbol from raw text).
SPECIAL_TOKEN_STRINGS = ("<eos>", "<pad>", "<bos>", "<unk>", "<mask>")

#: Word lists of the synthetic captions (see synthetic_captions).
CAPTION_WORDS_BY_KIND = {
    "a": "red blue green yellow black white small large old new wooden metal bright dark",
    "n": "cat dog bird car bicycle train boat plane house tree flower robot arm block table "
    "chair sofa bed book cup bottle phone computer camera person child woman man horse cake",
    "p": "kitchen street beach mountain river city park garden office forest desert lake "
    "bridge market stadium classroom",
    "v": "sitting standing running playing sleeping lying walking flying parked floating",
}
CAPTION_FORMS = [
    "a photo of a {a} {n}",
    "a {a} {n} {v} in the {p}",
    "two {n}s and a {a} {n} near the {p}",
    "close-up of a {n} on a {a} table",
    "A {A} {N} {V} NEXT TO THE {P} at night",
    "the {p} with a {a} {n}, seen from above",
    "{n} {v} by the {p} on a sunny day",
]


def synthetic_captions(count: int, *, seed: int) -> list[str]:
    """Caption-like texts from a fixed grammar (a stand-in for an index's queries)."""
    rng = random.Random(seed)
    words = {key: value.split() for key, value in CAPTION_WORDS_BY_KIND.items()}
    texts = []
    for _ in range(count):
        picked = {key: rng.choice(options) for key, options in words.items()}
        upper = {key.upper(): value.upper() for key, value in picked.items()}
        texts.append(rng.choice(CAPTION_FORMS).format(**picked, **upper))
    return texts


#: Every word of the caption grammar, in order (the vocabulary of ``load-test``'s random texts).
CAPTION_WORDS: list[str] = [
    word for words in CAPTION_WORDS_BY_KIND.values() for word in words.split()
]
