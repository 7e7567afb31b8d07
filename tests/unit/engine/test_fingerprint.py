"""engine/fingerprint.py: the canonical JSON, the tokenizer's form, the lowercasing probes and
the contract document's digest (no model, no bundle)."""

from __future__ import annotations

import copy
import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest
from siglip_text.engine.contract import Contract
from siglip_text.engine.fingerprint import (
    canonical_json,
    detect_lowercase,
    fingerprint,
    tokenizer_digest,
    tokenizer_form,
)
from siglip_text.tools.lowercase import lowercase_normalizer, lowercase_normalizer_json
from tokenizers import normalizers

from devkit.contracts import contract_document

CONTRACT: dict[str, Any] = contract_document(
    repository="google/siglip2-base-patch16-224",
    revision="0123456789abcdef0123456789abcdef01234567",
    tokenizer="sha256:" + "1" * 64,
    lowercase="unicode",
    eos_id=1,
    pad_id=0,
    length=64,
    dimension=768,
    weights="sha256:" + "2" * 64,
    weights_of="checkpoint-text-tower",
)


def demo_tokenizer(demo_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((demo_dir / "tokenizer.json").read_text("utf-8"))
    return data


def test_canonical_json_is_rfc_8785_on_its_own_example() -> None:
    # RFC 8785 section 3.2.2's input and output
    value = json.loads(
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical_json(value) == expected.encode("utf-8")


def test_canonical_json_sorts_keys_by_utf16_code_units() -> None:
    # RFC 8785 section 3.2.3's sorting example: UTF-16 order puts U+1F600 before U+FB33
    keys = ["\u20ac", "\r", "\ufb33", "1", "\U0001f600", "\u0080", "\u00f6"]
    encoded = canonical_json({k: None for k in keys}).decode("utf-8")
    order = sorted(keys, key=lambda k: encoded.index(json.dumps(k, ensure_ascii=False)))
    assert order == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (-0.0, "0"),
        (0.1, "0.1"),
        (-2.5e-8, "-2.5e-8"),
        (123.0, "123"),
        (5e-324, "5e-324"),
    ],
)
def test_canonical_json_writes_numbers_as_ecmascript(number: float, text: str) -> None:
    assert canonical_json(number) == text.encode()


def test_canonical_json_refuses_what_json_cannot_hold() -> None:
    for bad in (float("nan"), float("inf"), "\ud800", {1: "a"}, b"bytes"):
        with pytest.raises((ValueError, TypeError, UnicodeEncodeError)):
            canonical_json(bad)


def test_a_vocabulary_is_written_the_same_by_the_fast_path_and_item_by_item(
    demo_dir: Path,
) -> None:
    # GIVEN a form whose vocabulary and merges go through json.dumps, with tokens that need
    # escapes (quotes, backslashes, controls, non-ASCII)
    data = demo_tokenizer(demo_dir)
    for i, token in enumerate(['"', "\\", "\x01", "\n", "é", "\u2028", "\U0001f431"]):
        data["model"]["vocab"][token] = 5000 + i
    form = tokenizer_form(data)
    # WHEN the same form is written with plain lists (item by item)
    plain = json.loads(json.dumps(form))
    # THEN the bytes are equal
    assert canonical_json(form) == canonical_json(plain)
    assert len(form["model"]["vocab"]) > 256  # the fast path was taken


def test_tokenizer_digest_ignores_formatting_key_order_and_the_merge_spelling(
    demo_dir: Path,
) -> None:
    data = demo_tokenizer(demo_dir)
    digest = tokenizer_digest(data)
    # reformatted with its keys shuffled, merges as "a b" strings or as pairs
    shuffled = json.loads(json.dumps(data, indent=4))
    rng = random.Random(7)
    vocab = list(shuffled["model"]["vocab"].items())
    rng.shuffle(vocab)
    shuffled["model"] = dict(reversed(list({**shuffled["model"], "vocab": dict(vocab)}.items())))
    shuffled["model"]["merges"] = [
        " ".join(m) if isinstance(m, list) else m for m in shuffled["model"]["merges"]
    ]
    assert tokenizer_digest(shuffled) == digest
    paired = copy.deepcopy(data)
    paired["model"]["merges"] = [
        m.split(" ", 1) if isinstance(m, str) else m for m in paired["model"]["merges"]
    ]
    assert tokenizer_digest(paired) == digest


def test_tokenizer_digest_ignores_what_the_server_replaces_with_the_contracts_rules(
    demo_dir: Path,
) -> None:
    data = demo_tokenizer(demo_dir)
    digest = tokenizer_digest(data)
    other = copy.deepcopy(data)
    other["post_processor"] = {"type": "TemplateProcessing", "single": [], "pair": []}
    other["padding"] = {"pad_id": 1}
    other["truncation"] = None
    other["decoder"] = None
    other["version"] = "9.9"
    assert tokenizer_digest(other) == digest


def test_nested_normalizer_sequences_have_one_form(demo_dir: Path) -> None:
    data = demo_tokenizer(demo_dir)
    steps = data["normalizer"]["normalizers"]
    flat = tokenizer_digest(data)
    nested = {
        **data,
        "normalizer": {
            "type": "Sequence",
            "normalizers": [{"type": "Sequence", "normalizers": steps[:2]}, steps[2]],
        },
    }
    assert tokenizer_digest(nested) == flat
    one = {**data, "normalizer": {"type": "Sequence", "normalizers": [steps[2]]}}
    assert tokenizer_digest(one) == tokenizer_digest({**data, "normalizer": steps[2]})


@pytest.mark.parametrize(
    "change",
    [
        "lowercasing removed",
        "one id moved",
        "a merge dropped",
        "an added token not special",
        "another pre-tokenizer",
    ],
)
def test_tokenizer_digest_changes_with_what_decides_the_ids(demo_dir: Path, change: str) -> None:
    data = demo_tokenizer(demo_dir)
    other = copy.deepcopy(data)
    if change == "lowercasing removed":
        other["normalizer"] = other["normalizer"]["normalizers"][2]
    elif change == "one id moved":
        vocab = other["model"]["vocab"]
        a, b = list(vocab)[300:302]
        vocab[a], vocab[b] = vocab[b], vocab[a]
    elif change == "a merge dropped":
        other["model"]["merges"] = other["model"]["merges"][:-1]
    elif change == "an added token not special":
        other["added_tokens"][1]["special"] = False
    else:
        other["pre_tokenizer"] = {"type": "Whitespace"}
    assert tokenizer_digest(other) != tokenizer_digest(data)


def test_lowercasing_json_is_what_tokenizers_writes_for_it() -> None:
    for mode in ("unicode", "ascii"):
        built = lowercase_normalizer(mode)
        assert built is not None
        assert json.loads(built.__getstate__()) == lowercase_normalizer_json(mode)
    assert lowercase_normalizer_json("none") is None


@pytest.mark.parametrize(
    ("normalizer", "mode"),
    [
        (lowercase_normalizer("unicode"), "unicode"),
        (lowercase_normalizer("ascii"), "ascii"),
        (normalizers.Lowercase(), "other"),  # every sigma medial, unlike str.lower
        (normalizers.Replace(" ", "▁"), "none"),
        (normalizers.Sequence([normalizers.NFKC(), lowercase_normalizer("unicode")]), "unicode"),
    ],
)
def test_lowercasing_is_told_from_what_the_normalizer_does(normalizer: Any, mode: str) -> None:
    assert detect_lowercase(normalizer.normalize_str) == mode


def test_python_lowercasings_are_told_apart() -> None:
    assert detect_lowercase(str.lower) == "unicode"
    assert detect_lowercase(lambda t: t) == "none"


def test_fingerprint_is_sha256_of_the_documents_canonical_json() -> None:
    contract = Contract.model_validate(CONTRACT)
    expected = hashlib.sha256(
        json.dumps(CONTRACT, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()  # ASCII keys and values, integers: plain sorted JSON is canonical here
    assert fingerprint(contract) == "sha256:" + expected


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("revision", "f" * 40),
        ("repository", "google/siglip2-large-patch16-256"),
        ("tokenizer", "sha256:" + "3" * 64),
        ("lowercase", "ascii"),
        ("length", 32),
        ("pad_id", 1),
        ("dimension", 1024),
        ("weights", "sha256:" + "4" * 64),
    ],
)
def test_fingerprint_differs_when_any_field_differs(field: str, value: Any) -> None:
    base = fingerprint(Contract.model_validate(CONTRACT))
    assert fingerprint(Contract.model_validate({**CONTRACT, field: value})) != base
