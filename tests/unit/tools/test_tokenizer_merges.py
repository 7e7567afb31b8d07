"""Pruning the merges and entries no lowercased text can use leaves every id as it was.

Held-out texts: the export's edge cases, captions, generated mixed-case multilingual text,
and (for the real Gemma tokenizer, when ``SIGLIP_GEMMA_TOKENIZER_DIR`` is set) strings
built from the vocabulary's own tokens in upper and lower case, which exercise the merges
that pruning keeps and the ones it drops.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from siglip_text.engine.errors import ModelLoadError
from siglip_text.engine.tokenization import SiglipTokenizer
from siglip_text.settings import demo_model_dir
from siglip_text.tools.export.tokenizer import apply_contract
from siglip_text.tools.export.tokenizer_merges import (
    EMPTY_TOKENIZER,
    prune_unreachable_merges,
)
from siglip_text.tools.texts import EDGE_CASE_TEXTS, synthetic_captions
from tokenizers import Tokenizer

from devkit.gemma import SKIP_REASON, tokenizer_dir

ALPHABET = list("aAbBzZ ÉéÜüßẞΣσςΑαДдЖжİıi\u0307\u0301.,'!?0123456789\t\n") + [
    "猫",
    "の",
    "고",
    "ق",
    "🐱",
    "\U0001f680",
    "\x00",
    "\ufffd",
]


def _tokenizer(data: dict[str, Any]) -> SiglipTokenizer:
    return SiglipTokenizer(Tokenizer.from_str(json.dumps(data)), max_length=64)


def _ids(tokenizer: SiglipTokenizer, texts: list[str]) -> list[list[int]]:
    return tokenizer.encode_texts(texts).ids.tolist()


def _with_uppercase_merges(data: dict[str, Any], count: int) -> dict[str, Any]:
    """The demo tokenizer plus ``count`` merges of upper-cased tokens (as a cased
    vocabulary such as Gemma's has): unreachable once the normalizer lowercases."""
    vocab = dict(data["model"]["vocab"])
    merges = list(data["model"]["merges"])
    added = 0
    for merge in list(merges):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        upper = (left.upper(), right.upper())
        if upper[0] == left or upper[1] == right or "<" in left + right:
            continue
        for token in (*upper, upper[0] + upper[1]):
            vocab.setdefault(token, len(vocab))
        merges.append(list(upper))
        added += 1
        if added == count:
            break
    return {**data, "model": {**data["model"], "vocab": vocab, "merges": merges}}


@pytest.fixture(scope="module")
def demo() -> tuple[SiglipTokenizer, SiglipTokenizer, int, int]:
    data = json.loads((demo_model_dir() / "tokenizer.json").read_text())
    cased = _with_uppercase_merges(data, 40)
    pruned, result = prune_unreachable_merges(cased)
    return _tokenizer(cased), _tokenizer(pruned), result.merges_before, result.merges_after


@pytest.mark.slow
def test_merges_of_uppercase_tokens_go_when_the_normalizer_lowercases(demo: Any) -> None:
    _, _, before, after = demo

    assert before - after == 40


@pytest.mark.slow
def test_entries_of_uppercase_tokens_go_and_every_kept_one_keeps_its_id() -> None:
    data = json.loads((demo_model_dir() / "tokenizer.json").read_text())
    cased = _with_uppercase_merges(data, 40)
    vocab = cased["model"]["vocab"]

    pruned, result = prune_unreachable_merges(cased)

    kept = pruned["model"]["vocab"]
    gone = set(vocab) - set(kept)
    assert gone and all(token != token.lower() for token in gone)
    assert all(vocab[token] == i for token, i in kept.items())
    assert (result.entries_before, result.entries_after) == (len(vocab), len(kept))
    # the id range is the unpruned one: token-id inputs may use every id
    assert result.token_ids == max(vocab.values()) + 1


@pytest.mark.slow
def test_the_id_range_of_a_pruned_tokenizer_comes_from_the_manifest() -> None:
    data = json.loads((demo_model_dir() / "tokenizer.json").read_text())
    pruned, result = prune_unreachable_merges(_with_uppercase_merges(data, 40))
    highest = result.token_ids - 1
    assert highest not in pruned["model"]["vocab"].values()  # an upper-case entry, gone

    # WITH the manifest's range, the highest id is a valid token-id input
    served = SiglipTokenizer(
        Tokenizer.from_str(json.dumps(pruned)), max_length=64, token_ids=result.token_ids
    )
    assert served.encode_token_ids([[highest]]).ids[0, 0] == highest
    # WITHOUT it, the file's own count would refuse ids that the model has rows for
    assert _tokenizer(pruned).vocab_size < result.token_ids
    # AND a range smaller than the file's entries is a manifest of another tokenizer
    with pytest.raises(ModelLoadError, match="does not belong to this tokenizer.json"):
        SiglipTokenizer(Tokenizer.from_str(json.dumps(pruned)), max_length=64, token_ids=10)


@pytest.mark.slow
def test_the_held_out_texts_would_catch_a_wrongly_dropped_entry(demo: Any) -> None:
    full, _, _, _ = demo
    data = json.loads((demo_model_dir() / "tokenizer.json").read_text())
    pruned, _ = prune_unreachable_merges(_with_uppercase_merges(data, 40))
    # GIVEN a pruning that also drops an entry lowercased text produces (a letter)
    vocab = dict(pruned["model"]["vocab"])
    del vocab["k"]
    merges = [m for m in pruned["model"]["merges"] if "k" not in "".join(m)]
    wrong = {**pruned, "model": {**pruned["model"], "vocab": vocab, "merges": merges}}

    # THEN the held-out texts tell the two apart
    texts = EDGE_CASE_TEXTS + synthetic_captions(300, seed=11)
    assert _ids(_tokenizer(wrong), texts) != _ids(full, texts)


@pytest.mark.slow
def test_merges_of_uppercase_tokens_stay_when_the_normalizer_keeps_case() -> None:
    data = json.loads((demo_model_dir() / "tokenizer.json").read_text())
    cased = _with_uppercase_merges(data, 40)
    cased["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}

    pruned, result = prune_unreachable_merges(cased)

    # the character rule drops nothing; only merges that never fire go (an upper-cased part
    # such as "TH" that no merge forms: it is in the vocabulary, but no text makes it)
    assert result.merges_before - result.merges_after == result.never_fire
    texts = [t.upper() for t in EDGE_CASE_TEXTS] + synthetic_captions(300, seed=11)
    assert _ids(_tokenizer(pruned), texts) == _ids(_tokenizer(cased), texts)


@pytest.mark.slow
def test_pruned_demo_tokenizer_gives_identical_ids_on_held_out_texts(demo: Any) -> None:
    full, pruned, _, _ = demo
    texts = EDGE_CASE_TEXTS + synthetic_captions(300, seed=11)

    assert _ids(pruned, texts) == _ids(full, texts)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=ALPHABET, max_size=40), min_size=1, max_size=8))
def test_pruned_demo_tokenizer_gives_identical_ids_on_generated_text(
    demo: Any, texts: list[str]
) -> None:
    full, pruned, _, _ = demo

    assert _ids(pruned, texts) == _ids(full, texts)


def test_a_normalizer_that_is_not_per_character_keeps_every_merge() -> None:
    data = json.loads((demo_model_dir() / "tokenizer.json").read_text())
    data["normalizer"] = {"type": "Precompiled", "precompiled_charsmap": None}

    _, result = prune_unreachable_merges(data)

    assert result.merges_after == result.merges_before
    assert "not per-character" in result.reason


# -- merges that never fire: BPE on each token's own string ----------------------------------


def _bpe(vocab: list[str], merges: list[str]) -> dict[str, Any]:
    """A bare BPE tokenizer.json: no normalizer, no pre-tokenizer."""
    tokens = {token: i for i, token in enumerate(["<unk>", *vocab])}
    model = {"unk_token": "<unk>", "fuse_unk": False, "byte_fallback": False}
    return {
        **EMPTY_TOKENIZER,
        "model": {**EMPTY_TOKENIZER["model"], **model, "vocab": tokens, "merges": merges},
    }


def _bare_ids(data: dict[str, Any], texts: list[str]) -> list[list[int]]:
    tokenizer = Tokenizer.from_str(json.dumps(data))
    return [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


def _every_string(alphabet: str, longest: int) -> list[str]:
    strings = [""]
    for _ in range(longest):
        strings = [s + c for s in strings for c in alphabet] + strings
    return sorted(set(strings) - {""})


def test_only_the_last_merge_of_a_token_stays() -> None:
    # GIVEN "abc" listed as both of its splits, as a SentencePiece conversion lists them
    data = _bpe(["a", "b", "c", "ab", "bc", "abc"], ["a b", "b c", "ab c", "a bc"])

    pruned, result = prune_unreachable_merges(data)

    # THEN "a bc" goes: "a b" outranks "b c", so "abc" is always "ab" + "c"
    assert pruned["model"]["merges"] == ["a b", "b c", "ab c"]
    assert result.never_fire == 1
    texts = _every_string("abc", 7)
    assert _bare_ids(pruned, texts) == _bare_ids(data, texts)


def test_a_token_that_is_never_formed_goes_with_its_merges() -> None:
    # GIVEN "abc" made only from "a" + "bc", which "a b" (the lower rank) always pre-empts
    data = _bpe(["a", "b", "c", "ab", "bc", "abc"], ["a b", "b c", "a bc"])

    pruned, _ = prune_unreachable_merges(data)

    assert pruned["model"]["merges"] == ["a b", "b c"]
    assert "abc" not in pruned["model"]["vocab"]
    assert pruned["model"]["vocab"]["bc"] == data["model"]["vocab"]["bc"]
    texts = _every_string("abc", 7)
    assert _bare_ids(pruned, texts) == _bare_ids(data, texts)


@st.composite
def _random_bpe(draw: Any) -> dict[str, Any]:
    """A vocabulary grown from four letters by random merges of the tokens so far, listed
    in a random order, with some tokens reachable by more than one split."""
    tokens = list("abcd")
    merges: list[str] = []
    for _ in range(draw(st.integers(1, 40))):
        left, right = draw(st.sampled_from(tokens)), draw(st.sampled_from(tokens))
        if f"{left} {right}" not in merges:
            merges.append(f"{left} {right}")
            if left + right not in tokens:
                tokens.append(left + right)
    return _bpe(tokens, draw(st.permutations(merges)))


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(_random_bpe(), st.lists(st.text(alphabet="abcd", min_size=1, max_size=24), max_size=30))
def test_pruned_random_bpe_gives_identical_ids(data: dict[str, Any], texts: list[str]) -> None:
    pruned, result = prune_unreachable_merges(data)

    assert "never fire and" in result.reason  # the simulation agreed with tokenizers
    texts = texts + _every_string("abcd", 5)
    assert _bare_ids(pruned, texts) == _bare_ids(data, texts)


# -- the real Gemma tokenizer ---------------------------------------------------------------


@pytest.fixture(scope="module")
def gemma() -> dict[str, Any]:
    directory = tokenizer_dir()
    if directory is None:
        pytest.skip(SKIP_REASON)
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    apply_contract(tokenizer, lowercase="unicode", max_length=64)
    data = json.loads(tokenizer.to_str())
    pruned, _ = prune_unreachable_merges(data)
    # Texts from the vocabulary itself: 4,000 random tokens, five to a text, as they are,
    # upper-cased and title-cased (the normalizer lowercases all of them).
    rng = random.Random(15)
    vocab = [t.replace("▁", " ") for t in data["model"]["vocab"] if not t.startswith("<")]
    picked = rng.sample(vocab, 4000)
    texts = ["".join(picked[i : i + 5]) for i in range(0, len(picked), 5)]
    texts += [t.upper() for t in texts[:300]] + [t.title() for t in texts[300:600]]
    texts += EDGE_CASE_TEXTS + synthetic_captions(300, seed=11)
    return {
        "data": data,
        "pruned": pruned,
        "texts": texts,
        "ids": _ids(SiglipTokenizer(tokenizer, max_length=64), texts),
    }


@pytest.mark.slow
@pytest.mark.gemma
def test_gemma_tokenizer_keeps_under_a_third_of_its_merges(gemma: Any) -> None:
    data, pruned = gemma["data"], gemma["pruned"]

    # about 31% go for a character lowercased text never has, and most of the rest because
    # the SentencePiece conversion lists every split of a token, of which only one fires
    kept = len(pruned["model"]["merges"]) / len(data["model"]["merges"])
    assert 0.2 < kept < 0.33
    vocab, entries = data["model"]["vocab"], pruned["model"]["vocab"]
    assert 0.65 < len(entries) / len(vocab) < 0.8
    assert all(vocab[token] == i for token, i in entries.items())
    # the byte-fallback tokens stay, upper-case hex and all (Gemma has 255: tab is "\t")
    byte_tokens = [f"<0x{b:02X}>" for b in range(256) if f"<0x{b:02X}>" in vocab]
    assert len(byte_tokens) >= 255 and all(token in entries for token in byte_tokens)


@pytest.mark.slow
@pytest.mark.gemma
def test_pruned_gemma_tokenizer_gives_identical_ids_on_held_out_texts(gemma: Any) -> None:
    assert _ids(_tokenizer(gemma["pruned"]), gemma["texts"]) == gemma["ids"]


@pytest.mark.slow
@pytest.mark.gemma
def test_the_held_out_texts_would_catch_a_wrongly_dropped_merge(gemma: Any) -> None:
    # GIVEN a pruning that also drops merges that lowercased text does use
    pruned = gemma["pruned"]
    kept = pruned["model"]["merges"]
    wrong = {**pruned, "model": {**pruned["model"], "merges": kept[: len(kept) // 2]}}

    # THEN the same texts tell the two apart
    assert _ids(_tokenizer(wrong), gemma["texts"]) != gemma["ids"]


@pytest.mark.slow
@pytest.mark.gemma
def test_the_pruned_file_loads_with_merges_as_strings_and_the_same_ids(
    gemma: Any, tmp_path: Path
) -> None:
    from siglip_text.tools.export.tokenizer_merges import prune_tokenizer_file

    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(gemma["data"], ensure_ascii=False))

    prune_tokenizer_file(path)

    written = json.loads(path.read_text())
    assert all(isinstance(m, str) for m in written["model"]["merges"])
    tokenizer = SiglipTokenizer.from_file(path, max_length=64)
    assert _ids(tokenizer, gemma["texts"]) == gemma["ids"]
