"""The prefix window against the whole text, with the real 256k Gemma tokenizer as a bundle
serves it (export's lowercasing before its normalizer): the kept ids, their offsets, the
``truncated`` flag and the token count of every text around the window's edges are those
of tokenizing the text whole. Emoji (a token each, or 4 byte-fallback tokens), CJK, runs of
spaces (16 to a token), combining marks, Greek final sigma and mixed texts, cut at and
around each window size, and texts of 61 to 66 tokens longer than the window. Skips when
``SIGLIP_GEMMA_TOKENIZER_DIR`` is unset.
"""

from __future__ import annotations

import json

import pytest
from siglip_text.engine.tokenization import WINDOW_BYTES_PER_TOKEN, SiglipTokenizer
from siglip_text.tools.checkpoint_fingerprint import served_tokenizer_data
from tokenizers import Tokenizer

from devkit import gemma

pytestmark = [
    pytest.mark.slow,
    pytest.mark.gemma,
]  # the 256k tokenizer loads in about a second, its texts in 2

LENGTH = 64
KEPT = LENGTH - 1
EOS = 1
WINDOW = WINDOW_BYTES_PER_TOKEN * LENGTH
EMOJI = [chr(c) for c in range(0x1F300, 0x1F6FF)]
CJK = [chr(c) for c in range(0x4E00, 0x9FFF, 7)]


@pytest.fixture(scope="module")
def tokenizer() -> SiglipTokenizer:
    source = gemma.tokenizer_dir_or_skip()
    data = json.loads((source / "tokenizer.json").read_text())
    served = Tokenizer.from_str(json.dumps(served_tokenizer_data(data, "unicode")))
    return SiglipTokenizer(served, max_length=LENGTH)


def run(alphabet: list[str], n: int, start: int = 0) -> str:
    return "".join(alphabet[(start + i) % len(alphabet)] for i in range(n))


def window_texts() -> dict[str, str]:
    """Texts whose kept tokens end near, at or past each window's edge (in UTF-8 bytes)."""
    texts: dict[str, str] = {}
    for size in (WINDOW // 8, WINDOW // 4, WINDOW // 2, WINDOW, 2 * WINDOW):
        for delta in (-1, 0, 1):
            n = size + delta
            texts[f"emoji-{n}"] = run(EMOJI, n // 4, start=n)
            texts[f"cjk-{n}"] = run(CJK, n // 3, start=n)
            texts[f"spaces-{n}"] = " " * n
            texts[f"spaces-{n}-word"] = " " * n + "Cat"
            texts[f"combining-{n}"] = "e\u0301" * (n // 3)
            texts[f"ascii-{n}"] = "a" * n
    for cut in (WINDOW - 1, WINDOW, WINDOW + 1, 2 * WINDOW - 1, 2 * WINDOW, 2 * WINDOW + 1):
        tails = {
            "emoji": run(EMOJI, 60),
            "cjk": run(CJK, 90),
            "accents": "É" * 120,
            "combining": "E\u0301" * 120,
            "spaces": " " * 700,
            "sigma": "ΟΔΟΣ ΣΟΦΟΣ " * 40,
        }
        for name, tail in tails.items():
            # the tail starts exactly at the cut, one byte before or after it
            texts[f"x{cut}-{name}"] = "x" * cut + tail
            texts[f"prose{cut}-{name}"] = ("A photo of a cat " * cut)[:cut] + tail
    words = ["a", "Photo", "of", "猫", "照片", "صورة", "🐱", "e\u0301", "ΟΔΟΣ", "  ", ",.!"]
    for i in range(60):
        texts[f"mixed-{i}"] = " ".join(words[(i * 5 + j * j) % len(words)] for j in range(40 * i))
    return texts


def assert_as_whole(tokenizer: SiglipTokenizer, texts: list[str]) -> None:
    batch = tokenizer.encode_texts(texts)
    tokens = tokenizer.tokens(texts)
    for i, text in enumerate(texts):
        whole = tokenizer._tokenizer.encode(text, add_special_tokens=False)
        kept = whole.ids[:KEPT] + [EOS]
        assert batch.ids[i].tolist()[: len(kept)] == kept, f"text {i}: {text[:40]!r}"
        assert batch.lengths[i] == len(kept)
        assert batch.truncated[i] == (len(whole.ids) > KEPT), f"text {i}: {text[:40]!r}"
        assert [t.id for t in tokens[i]] == kept
        assert [(t.start, t.stop) for t in tokens[i][:-1]] == whole.offsets[:KEPT]


def test_kept_ids_offsets_and_cut_equal_the_whole_texts(tokenizer: SiglipTokenizer) -> None:
    texts = window_texts()
    assert len(texts) > 200 and tokenizer.vocab_size == gemma.VOCAB_SIZE
    assert_as_whole(tokenizer, list(texts.values()))


def test_texts_of_61_to_66_tokens_longer_than_the_window(tokenizer: SiglipTokenizer) -> None:
    # runs of spaces are about 16 to a token: 63 tokens take some 1,000 bytes, past the window
    found: dict[int, list[str]] = {}
    for n in range(950, 1100):
        for text in (" " * n, "cat" + " " * n, " " * n + "cat", ("  " * 20 + "X") * (n // 41)):
            count = len(tokenizer._tokenizer.encode(text, add_special_tokens=False).ids)
            if 61 <= count <= 66:
                found.setdefault(count, []).append(text)
    assert sorted(found) == [61, 62, 63, 64, 65, 66]
    assert min(len(t.encode()) for texts in found.values() for t in texts) > WINDOW
    assert_as_whole(tokenizer, [t for texts in found.values() for t in texts])
    for count, texts in found.items():
        refused = [tokenizer.count_tokens(t) for t in texts]
        assert refused == [(count + 1, True)] * len(texts)


def test_a_window_that_cuts_the_last_kept_token_is_widened(tokenizer: SiglipTokenizer) -> None:
    # one-token words of 8 bytes with a space: the window's cut falls inside the 63rd word
    # for some shifts, where the prefix alone has 64 tokens and a broken last kept one
    texts = [
        "x" * shift + (word + " ") * 200
        for word in ("kitchen", "picture", "bicycle", "morning")
        for shift in range(0, 40)
    ]
    inner = tokenizer._tokenizer
    broken = [
        text
        for text in texts
        if len(head := inner.encode(text.encode()[:WINDOW].decode(), add_special_tokens=False))
        > KEPT
        and head.ids[:KEPT] != inner.encode(text, add_special_tokens=False).ids[:KEPT]
    ]
    assert broken  # the window alone would have kept the wrong tokens for these
    assert_as_whole(tokenizer, texts)
