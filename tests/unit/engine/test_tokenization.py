from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from siglip_text.engine.errors import InvalidInputError, ModelLoadError
from siglip_text.engine.tokenization import (
    SLICE_BYTES,
    WINDOW_BYTES_PER_TOKEN,
    SiglipTokenizer,
)

from devkit.paths import FIXTURES

PAD, EOS, BOS = 0, 1, 2


@pytest.fixture(scope="module")
def tokenizer(demo_dir: Path) -> SiglipTokenizer:
    return SiglipTokenizer.from_file(demo_dir / "tokenizer.json", max_length=64)


def case_ids(case: dict[str, Any]) -> str:
    return repr(case["text"][:24])


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "reference_case" in metafunc.fixturenames:
        cases = json.loads((FIXTURES / "demo_reference.json").read_text())["cases"]
        metafunc.parametrize("reference_case", cases, ids=[case_ids(c) for c in cases])


def test_ids_equal_hugging_face_reference(tokenizer: SiglipTokenizer, reference_case) -> None:
    batch = tokenizer.encode_texts([reference_case["text"]])
    assert batch.ids[0].tolist() == reference_case["input_ids"]


def test_whole_reference_batch_matches_at_once(tokenizer: SiglipTokenizer, reference) -> None:
    texts = [c["text"] for c in reference["cases"]]
    batch = tokenizer.encode_texts(texts)
    assert batch.ids.tolist() == [c["input_ids"] for c in reference["cases"]]


def test_every_row_is_exactly_64_tokens_with_no_bos(tokenizer: SiglipTokenizer) -> None:
    batch = tokenizer.encode_texts(["a", "a photo of a cat " * 40])
    assert batch.ids.shape == (2, 64)
    assert BOS not in batch.ids[:, 0].tolist()


def test_text_longer_than_64_tokens_keeps_eos_last(tokenizer: SiglipTokenizer) -> None:
    batch = tokenizer.encode_texts(["a red block and a robot arm " * 30])
    row = batch.ids[0].tolist()
    assert row[-1] == EOS and PAD not in row
    assert batch.lengths == [64]


def test_short_text_ends_with_eos_then_right_padding(tokenizer: SiglipTokenizer) -> None:
    batch = tokenizer.encode_texts(["a cat"])
    row = batch.ids[0].tolist()
    n = batch.lengths[0]
    assert row[n - 1] == EOS
    assert row[n:] == [PAD] * (64 - n)
    assert EOS not in row[: n - 1]


def test_empty_text_is_eos_then_pads(tokenizer: SiglipTokenizer) -> None:
    batch = tokenizer.encode_texts([""])
    assert batch.ids[0].tolist() == [EOS] + [PAD] * 63
    assert batch.lengths == [1]


@pytest.mark.parametrize("special", ["<eos>", "<pad>", "<bos>", "<unk>"])
def test_special_token_strings_in_text_are_text(tokenizer: SiglipTokenizer, special: str) -> None:
    # SentencePiece (big_vision) never makes a control id from raw text.
    batch = tokenizer.encode_texts([f"a {special} b", special])
    control = {PAD, EOS, BOS, 3}
    for row, n in zip(batch.ids.tolist(), batch.lengths, strict=True):
        assert row[n - 1] == EOS and row[n:] == [PAD] * (64 - n)
        assert control.isdisjoint(row[: n - 1]), row[:n]
    # the characters, spelled as the tokenizer spells them
    assert tokenizer.encode_texts([special]).lengths[0] > 2


def test_special_token_strings_are_text_past_the_window_too(tokenizer: SiglipTokenizer) -> None:
    long_text = "<eos> " * 2000  # longer than the first window: the long-text path
    row = tokenizer.encode_texts([long_text]).ids[0].tolist()
    assert row[-1] == EOS and EOS not in row[:-1] and PAD not in row


def test_uppercase_and_lowercase_text_give_the_same_ids(tokenizer: SiglipTokenizer) -> None:
    batch = tokenizer.encode_texts(
        ["A PHOTO OF A CAT on the Beach", "a photo of a cat on the beach"]
    )
    assert batch.ids[0].tolist() == batch.ids[1].tolist()


def test_token_ids_are_taken_as_given_without_eos(tokenizer: SiglipTokenizer) -> None:
    batch = tokenizer.encode_token_ids([[300, 301, 302]])
    assert batch.ids[0].tolist() == [300, 301, 302] + [PAD] * 61
    assert batch.lengths == [3]


def test_token_ids_longer_than_64_are_truncated_to_64(tokenizer: SiglipTokenizer) -> None:
    batch = tokenizer.encode_token_ids([list(range(10, 110))])
    assert batch.ids[0].tolist() == list(range(10, 74))
    assert batch.lengths == [64]


@pytest.mark.parametrize("offset", [-1, 0, 10**6, 2**70])
def test_token_id_outside_vocabulary_is_invalid_input(
    tokenizer: SiglipTokenizer, offset: int
) -> None:
    vocab = tokenizer.vocab_size
    bad = -1 if offset == -1 else vocab + offset
    with pytest.raises(
        InvalidInputError, match=rf"input\[1\].*outside the vocabulary \[0, {vocab}\)"
    ):
        tokenizer.encode_token_ids([[5], [7, bad]])


@pytest.mark.parametrize("position", [64, 65, 8191])
def test_token_id_outside_vocabulary_past_the_cut_is_invalid_input(
    tokenizer: SiglipTokenizer, position: int
) -> None:
    ids = [5] * (position + 1)
    ids[position] = tokenizer.vocab_size
    with pytest.raises(InvalidInputError, match=r"input\[0\].*outside the vocabulary"):
        tokenizer.encode_token_ids([ids])


def test_highest_vocabulary_id_is_accepted(tokenizer: SiglipTokenizer) -> None:
    batch = tokenizer.encode_token_ids([[tokenizer.vocab_size - 1]])
    assert batch.ids[0, 0] == tokenizer.vocab_size - 1


def test_lone_surrogate_is_invalid_input_naming_its_index(tokenizer: SiglipTokenizer) -> None:
    with pytest.raises(InvalidInputError, match=r"input\[2\].*lone surrogate"):
        tokenizer.encode_texts(["ok", "fine", "bad \ud800 text"])


def test_long_surrogate_text_is_invalid_input_too(tokenizer: SiglipTokenizer) -> None:
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        tokenizer.encode_texts(["x" * 5000 + "\udfff"])


def long_texts() -> list[str]:
    rng = random.Random(7)
    words = [
        "a",
        "photo",
        "of",
        "the",
        "red",
        "cat",
        "dog",
        "CAFÉ",
        "猫",
        "照片",
        "صورة",
        "🐱",
        "supercalifragilistic",
        ",.!",
    ]
    texts = [" ".join(rng.choice(words) for _ in range(n)) for n in (200, 900, 3000)]
    texts += ["x" * 5000, " " * 3000 + "cat", "🐱" * 2000, "猫的照片" * 600, "a" + " " * 4000]
    texts += ["".join(rng.choice("ab ") for _ in range(6000))]
    return texts


@pytest.mark.parametrize("text", long_texts(), ids=lambda t: f"{len(t)}chars-{t[:6]!r}")
def test_long_text_prefix_window_gives_same_ids_as_whole_text(
    tokenizer: SiglipTokenizer, text: str
) -> None:
    whole = tokenizer._tokenizer.encode(text, add_special_tokens=False).ids[:63] + [EOS]
    assert tokenizer.encode_texts([text]).ids[0].tolist()[: len(whole)] == whole


@contextmanager
def tokenizer_calls(tokenizer: SiglipTokenizer) -> Iterator[list[list[str]]]:
    """The pieces each call of the wrapped `tokenizers.Tokenizer` gets, in order."""
    calls: list[list[str]] = []
    inner = tokenizer._tokenizer
    original = inner.encode_batch

    class Recording:
        def __getattr__(self, name: str) -> Any:
            return getattr(inner, name)

        def encode_batch(self, pieces: list[str], **kwargs: Any) -> Any:
            calls.append(list(pieces))
            return original(pieces, **kwargs)

    tokenizer._tokenizer = Recording()  # type: ignore[assignment]
    try:
        yield calls
    finally:
        tokenizer._tokenizer = inner


def test_megabyte_text_is_tokenized_through_a_bounded_prefix(tokenizer: SiglipTokenizer) -> None:
    with tokenizer_calls(tokenizer) as calls:
        batch = tokenizer.encode_texts(["a photo of a cat " * 70_000])
    assert batch.lengths == [64]
    assert max(len(piece) for pieces in calls for piece in pieces) <= 4 * 64 * 16


def test_a_maximal_request_is_tokenized_in_slices_of_bounded_windows(
    tokenizer: SiglipTokenizer,
) -> None:
    # texts of 765 distinct emoji (3 KB each, 6 MB for 2048): with byte fallback an emoji
    # is up to 4 tokens, so windows in characters, or a request in one tokenizer call, hold
    # about a million tokens at once (256 texts here: 4 times the slice already)
    texts = ["".join(chr(0x1F300 + (i * 7 + j) % 2000) for j in range(765)) for i in range(256)]
    with tokenizer_calls(tokenizer) as calls:
        batch = tokenizer.encode_texts(texts)
    assert batch.lengths == [64] * 256 and all(batch.truncated)
    sizes = [[len(piece.encode("utf-8")) for piece in pieces] for pieces in calls]
    assert max(max(call) for call in sizes) <= 2 * WINDOW_BYTES_PER_TOKEN * 64
    assert max(sum(call) for call in sizes) <= SLICE_BYTES


@pytest.mark.parametrize(
    ("token", "renamed", "cleared"),
    [("<pad>", "<pad_renamed>", "padding"), ("<eos>", "<end>", "post_processor")],
)
def test_tokenizer_without_its_pad_or_eos_token_fails_to_load(
    tmp_path: Path, demo_dir: Path, token: str, renamed: str, cleared: str
) -> None:
    data = json.loads((demo_dir / "tokenizer.json").read_text())
    data["model"]["vocab"][renamed] = data["model"]["vocab"].pop(token)
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] != token]
    data[cleared] = None
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ModelLoadError, match=f"{token} missing"):
        SiglipTokenizer.from_file(path, max_length=64)


def test_tokenizer_file_that_is_not_a_tokenizer_fails_to_load(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text('{"hello": "world"}')
    with pytest.raises(ModelLoadError, match="tokenizer .* cannot be loaded"):
        SiglipTokenizer.from_file(path, max_length=64)


def test_stored_padding_and_truncation_settings_do_not_change_ids(
    tmp_path: Path, demo_dir: Path, reference
) -> None:
    data = json.loads((demo_dir / "tokenizer.json").read_text())
    data["truncation"] = {
        "direction": "Left",
        "max_length": 8,
        "strategy": "LongestFirst",
        "stride": 0,
    }
    data["padding"] = {
        "strategy": "BatchLongest",
        "direction": "Left",
        "pad_to_multiple_of": None,
        "pad_id": 1,
        "pad_type_id": 0,
        "pad_token": "<eos>",
    }
    data["post_processor"] = None
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data))
    tokenizer = SiglipTokenizer.from_file(path, max_length=64)
    texts = [c["text"] for c in reference["cases"]]
    assert tokenizer.encode_texts(texts).ids.tolist() == [
        c["input_ids"] for c in reference["cases"]
    ]
