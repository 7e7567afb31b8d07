"""The Gemma-size tokenizer of benchmarks/make_full_model.py, built small and fast."""

from __future__ import annotations

from benchmarks.make_full_model import SPECIAL, build_tokenizer


def test_ids_are_gemmas_specials_then_the_256_byte_tokens() -> None:
    tokenizer = build_tokenizer(30_000)

    assert tokenizer.get_vocab_size() == 30_000
    assert [tokenizer.token_to_id(t) for t in SPECIAL] == [0, 1, 2, 3]
    assert [tokenizer.token_to_id(f"<0x{b:02X}>") for b in (0, 255)] == [4, 259]


def test_common_words_are_single_tokens_and_unknown_characters_fall_back_to_bytes() -> None:
    tokenizer = build_tokenizer(30_000)

    assert tokenizer.encode("a photo of a cat").tokens == [
        "a",
        "▁photo",
        "▁of",
        "▁a",
        "▁cat",
        "<eos>",
    ]
    assert tokenizer.encode("🐱").tokens == ["<0xF0>", "<0x9F>", "<0x90>", "<0xB1>", "<eos>"]


def test_the_tokenizer_is_the_same_on_every_build() -> None:
    assert build_tokenizer(30_000).to_str() == build_tokenizer(30_000).to_str()
