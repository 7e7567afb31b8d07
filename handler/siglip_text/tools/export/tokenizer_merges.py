"""Exact reduction of a BPE ``tokenizer.json``: drop the merges and the vocabulary entries
no normalized text can reach.

Loading a 256k-entry Gemma tokenizer spends its time building the merge table (580,604
merges) and the vocabulary. After the bundle's lowercasing, no normalized text contains a
character such as ``A`` or ``Σ``, so no token containing one can ever be formed, and no
merge of such a token can ever apply: 31% of Gemma's merges and 28% of its entries.
Removing them changes no id:

- a BPE merge applies to two adjacent symbols of a word; every symbol is a character of the
  normalized text, a byte-fallback token ``<0xXX>``, the unknown token, or the result of
  earlier merges, so its string is made of characters the normalizer can output (byte
  tokens are kept apart);
- the remaining merges keep their relative order, so their ranks compare as before;
- every entry kept keeps its id; an entry goes only if no text can produce it (not a
  character the normalizer outputs, nor made of such characters, nor a byte-fallback
  token, the unknown token, an added token, or a part or result of a kept merge).

The ids then no longer run 0..n-1 without gaps, so the manifest records their range
(``tokenizer_merges.token_ids``): token-id inputs and the probe use it.

The characters the normalizer can output are found by running the tokenizer's own normalizer
(the Rust library and its Unicode tables, not Python's) over every code point, which is
exact when the normalizer acts on each character independently: only such normalizers (and
pre-tokenizers that only split) are pruned; any other leaves the file as it is. The export
check then compares the pruned tokenizer with transformers' on the contract's edge cases.
"""

from __future__ import annotations

import json
import re
from collections.abc import Set
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

#: A byte-fallback token (`tokenizers`' BPE writes each byte as ``<0xXX>``, upper-case hex).
_BYTE_TOKEN = re.compile(r"<0x[0-9A-F]{2}>")

#: Normalizers whose output characters are those of the characters taken one at a time
#: (plus the literal text they insert: Replace's content, Prepend's prefix). Unicode
#: normalization forms compose only into characters that are themselves normalized.
_PER_CHARACTER_NORMALIZERS = {
    "Sequence",
    "Lowercase",
    "Replace",
    "Prepend",
    "Strip",
    "NFC",
    "NFD",
    "NFKC",
    "NFKD",
}
#: Pre-tokenizers that only split the text (Metaspace also inserts its replacement).
_SPLITTING_PRE_TOKENIZERS = {
    "Sequence",
    "Split",
    "Punctuation",
    "Digits",
    "Whitespace",
    "WhitespaceSplit",
    "Metaspace",
}


@dataclass(frozen=True)
class MergePruning:
    """What `prune_unreachable_merges` did."""

    merges_before: int
    merges_after: int
    reason: str  # why nothing was pruned, or the rule that was applied
    entries_before: int = 0  # vocabulary entries of the model (added tokens aside)
    entries_after: int = 0
    token_ids: int = 0  # the id range, 0..token_ids-1, entries and added tokens

    @property
    def changed(self) -> bool:
        """Whether any merge or entry was dropped."""
        return (self.merges_after, self.entries_after) != (self.merges_before, self.entries_before)


def prune_tokenizer_file(path: Path) -> MergePruning:
    """Prune ``path`` (a ``tokenizer.json``) in place; see `prune_unreachable_merges`.

    The file is rewritten compact, with each merge as one ``"left right"`` string (the
    format of Gemma's own file, which ``tokenizers`` parses faster than ``["left",
    "right"]`` pairs) when no kept token contains a space.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    pruned, result = prune_unreachable_merges(data)
    if result.changed:
        pruned["model"]["merges"] = merge_strings(pruned["model"]["merges"])
        path.write_text(json.dumps(pruned, ensure_ascii=False), encoding="utf-8")
    return result


def merge_strings(merges: list[Any]) -> list[Any]:
    """Merges as ``"left right"`` strings, or unchanged if a token has a space in it."""
    pairs = [m.split(" ", 1) if isinstance(m, str) else list(m) for m in merges]
    if any(" " in part for pair in pairs for part in pair):
        return merges
    return [f"{left} {right}" for left, right in pairs]


def prune_unreachable_merges(data: dict[str, Any]) -> tuple[dict[str, Any], MergePruning]:
    """A copy of the ``tokenizer.json`` dict without the merges and the vocabulary entries
    that can never apply (see the module docstring)."""
    model = data.get("model") or {}
    merges = model.get("merges")
    vocab = model.get("vocab")
    if model.get("type") != "BPE" or not isinstance(merges, list) or not isinstance(vocab, dict):
        return data, MergePruning(0, 0, "not a BPE model with a merge list")
    count = len(merges)
    added = {t["content"]: int(t["id"]) for t in data.get("added_tokens") or []}
    ids = max([*vocab.values(), *added.values()], default=-1) + 1
    unchanged = MergePruning(count, count, "", len(vocab), len(vocab), ids)
    inserted: set[str] = set()
    if not _per_character(data.get("normalizer"), _PER_CHARACTER_NORMALIZERS, inserted):
        return data, replace(unchanged, reason="normalizer not per-character: kept all")
    if not _per_character(data.get("pre_tokenizer"), _SPLITTING_PRE_TOKENIZERS, inserted):
        return data, replace(unchanged, reason="pre-tokenizer may rewrite text: kept all")
    reachable = normalizer_output_characters(data, inserted)
    kept = [m for m in merges if _can_apply(m, reachable)]
    rule = "dropped merges with a character the normalizer never outputs"
    entries = vocab
    if model.get("continuing_subword_prefix") is None and model.get("end_of_word_suffix") is None:
        needed = set(added) | {model.get("unk_token")}
        for merge in kept:
            left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
            needed.update((left, right, left + right))
        byte_fallback = bool(model.get("byte_fallback"))
        entries = {
            token: i
            for token, i in vocab.items()
            if token in needed
            or set(token) <= reachable
            or (byte_fallback and _BYTE_TOKEN.fullmatch(token) is not None)
        }
        rule += ", and the entries no such text can produce"
    pruned = {**data, "model": {**model, "vocab": entries, "merges": kept}}
    return pruned, MergePruning(count, len(kept), rule, len(vocab), len(entries), ids)


def normalizer_output_characters(
    data: dict[str, Any], inserted: Set[str] = frozenset()
) -> set[str]:
    """Every character the tokenizer's normalizer outputs for some input character, and for
    the text that its steps insert (``inserted``: Replace's content, Prepend's prefix)."""
    from tokenizers import Tokenizer

    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    extra = "".join(sorted(inserted))
    if data.get("normalizer") is None:
        return set(every) | set(extra)
    probe = Tokenizer.from_str(json.dumps({**_EMPTY_TOKENIZER, "normalizer": data["normalizer"]}))
    normalizer = probe.normalizer
    assert normalizer is not None
    # Joined with nothing between them: a per-character normalizer gives the same
    # characters as one character at a time.
    return set(normalizer.normalize_str(every)) | set(normalizer.normalize_str(extra)) | set(extra)


_EMPTY_TOKENIZER: dict[str, Any] = {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": [],
    "normalizer": None,
    "pre_tokenizer": None,
    "post_processor": None,
    "decoder": None,
    "model": {"type": "BPE", "vocab": {}, "merges": []},
}


def _per_character(node: Any, allowed: set[str], inserted: set[str]) -> bool:
    """``node`` (a normalizer or pre-tokenizer dict) is made only of ``allowed`` types;
    collects the literal characters they insert."""
    if node is None:
        return True
    if not isinstance(node, dict) or node.get("type") not in allowed:
        return False
    for key in ("content", "prepend", "replacement"):
        if isinstance(node.get(key), str):
            inserted.update(node[key])
    children = node.get("normalizers") or node.get("pretokenizers") or []
    return all(_per_character(child, allowed, inserted) for child in children)


def _can_apply(merge: Any, reachable: set[str]) -> bool:
    parts = merge.split(" ", 1) if isinstance(merge, str) else merge
    return all("<0x" in part or set(part) <= reachable for part in parts)
