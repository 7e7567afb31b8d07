"""Pruning the merges no lowercased text can use leaves every id as it was.

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
from siglip_text.config import demo_model_dir
from siglip_text.tokenization import SiglipTokenizer
from siglip_text.tools.export.tokenizer import apply_contract
from siglip_text.tools.export.tokenizer_merges import prune_unreachable_merges
from siglip_text.tools.texts import EDGE_CASE_TEXTS, synthetic_captions
from tokenizers import Tokenizer

from tests.support.gemma import SKIP_REASON, tokenizer_dir

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


def test_merges_of_uppercase_tokens_go_when_the_normalizer_lowercases(demo: Any) -> None:
    _, _, before, after = demo

    assert before - after == 40


def test_merges_of_uppercase_tokens_stay_when_the_normalizer_keeps_case() -> None:
    data = json.loads((demo_model_dir() / "tokenizer.json").read_text())
    cased = _with_uppercase_merges(data, 40)
    cased["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}

    _, result = prune_unreachable_merges(cased)

    assert result.merges_after == result.merges_before


def test_pruned_demo_tokenizer_gives_identical_ids_on_held_out_texts(demo: Any) -> None:
    full, pruned, _, _ = demo
    texts = EDGE_CASE_TEXTS + synthetic_captions(300, seed=11)

    assert _ids(pruned, texts) == _ids(full, texts)


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


def test_gemma_tokenizer_loses_about_a_third_of_its_merges(gemma: Any) -> None:
    data, pruned = gemma["data"], gemma["pruned"]

    kept = len(pruned["model"]["merges"]) / len(data["model"]["merges"])
    assert 0.6 < kept < 0.75
    assert pruned["model"]["vocab"] == data["model"]["vocab"]


def test_pruned_gemma_tokenizer_gives_identical_ids_on_held_out_texts(gemma: Any) -> None:
    assert _ids(_tokenizer(gemma["pruned"]), gemma["texts"]) == gemma["ids"]


def test_the_held_out_texts_would_catch_a_wrongly_dropped_merge(gemma: Any) -> None:
    # GIVEN a pruning that also drops merges that lowercased text does use
    pruned = gemma["pruned"]
    kept = pruned["model"]["merges"]
    wrong = {**pruned, "model": {**pruned["model"], "merges": kept[: len(kept) // 2]}}

    # THEN the same texts tell the two apart
    assert _ids(_tokenizer(wrong), gemma["texts"]) != gemma["ids"]


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
