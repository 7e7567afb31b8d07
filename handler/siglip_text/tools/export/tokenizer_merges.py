"""Exact reduction of a BPE ``tokenizer.json``: drop the merges that can never fire and the
vocabulary entries no normalized text can reach.

Loading a 256k-entry Gemma tokenizer spends its time building the merge table (580,604
merges) and the vocabulary. Two rules remove what can never be used, and change no id.

**Characters the normalizer never outputs.** After the bundle's lowercasing, no normalized
text contains a character such as ``A`` or ``Σ``, so no token containing one can ever be
formed, and no merge of such a token can ever apply: 31% of Gemma's merges and 28% of its
entries.

- a BPE merge applies to two adjacent symbols of a word; every symbol is a character of the
  normalized text, a byte-fallback token ``<0xXX>``, the unknown token, or the result of
  earlier merges, so its string is made of characters the normalizer can output (byte
  tokens are kept apart);
- the characters the normalizer can output are found by running the tokenizer's own
  normalizer (the Rust library and its Unicode tables, not Python's) over every code point,
  which is exact when the normalizer acts on each character independently: only such
  normalizers (and pre-tokenizers that only split) are pruned; any other leaves the file as
  it is.

**Merges that never fire.** A token ``t`` formed from a span of a word is formed exactly as
it is when BPE runs on ``t``'s own string alone: until ``t`` exists, no merge crossed the
span's edges, and `tokenizers` applies the pairs inside the span in the same order whatever
surrounds them (lowest rank first, then leftmost), so the run inside the span is the run on
the span alone. Hence only one merge can ever produce ``t``: the last merge of that lone run.
A SentencePiece vocabulary converted to merges lists every split of every token (``a bc``
and ``ab c`` for ``abc``), so most of Gemma's merges are never that last one; and a token
whose lone run does not end as the one token can never be formed at all (its entry goes).
The lone runs are simulated here in the order `tokenizers` uses (``Word::merge_all``), and
the simulation is checked against `tokenizers`' own BPE on every token's string before any
merge is dropped: one disagreement and this rule drops nothing.

Both rules keep the remaining merges in their relative order, so their ranks compare as
before, and every entry kept keeps its id; an entry goes only if no text can produce it.
The ids then no longer run 0..n-1 without gaps, so the manifest records their range
(``tokenizer_merges.token_ids``): token-id inputs and the probe use it. The export check
then compares the pruned tokenizer with transformers' on the contract's edge cases.
"""

from __future__ import annotations

import functools
import heapq
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
    never_fire: int = 0  # of the merges dropped, those dropped by the second rule

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
    """A copy of the ``tokenizer.json`` dict without the merges that can never fire and the
    vocabulary entries that no text can produce (see the module docstring)."""
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
    never_fire = 0
    if model.get("continuing_subword_prefix") is None and model.get("end_of_word_suffix") is None:
        always = set(added) | ({model["unk_token"]} if model.get("unk_token") else set())
        byte_fallback = bool(model.get("byte_fallback"))
        needed = _parts_and_results(kept, always)
        entries = {
            token: i
            for token, i in vocab.items()
            if token in needed
            or set(token) <= reachable
            or (byte_fallback and _BYTE_TOKEN.fullmatch(token) is not None)
        }
        rule += ", and the entries no such text can produce"
        if model.get("dropout") is None and not model.get("ignore_merges"):
            before = len(kept)
            kept, entries, note = _drop_merges_that_never_fire(model, entries, kept, always)
            never_fire = before - len(kept)
            rule += note
    pruned = {**data, "model": {**model, "vocab": entries, "merges": kept}}
    return pruned, MergePruning(
        count, len(kept), rule, len(vocab), len(entries), ids, never_fire=never_fire
    )


def normalizer_output_characters(
    data: dict[str, Any], inserted: Set[str] = frozenset()
) -> Set[str]:
    """Every character the tokenizer's normalizer outputs for some input character, and for
    the text that its steps insert (``inserted``: Replace's content, Prepend's prefix)."""
    from tokenizers import Tokenizer

    every, characters = _every_character()
    extra = "".join(sorted(inserted))
    if data.get("normalizer") is None:
        return characters
    probe = Tokenizer.from_str(json.dumps({**EMPTY_TOKENIZER, "normalizer": data["normalizer"]}))
    normalizer = probe.normalizer
    assert normalizer is not None
    # Joined with nothing between them: a per-character normalizer gives the same
    # characters as one character at a time.
    return set(normalizer.normalize_str(every)) | set(normalizer.normalize_str(extra)) | set(extra)


@functools.cache
def _every_character() -> tuple[str, frozenset[str]]:
    """Every Unicode scalar value, as one string and as a set."""
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    return every, frozenset(every)


#: A tokenizer.json with nothing but an empty BPE model: the base of the probes built here.
EMPTY_TOKENIZER: dict[str, Any] = {
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


def _drop_merges_that_never_fire(
    model: dict[str, Any], entries: dict[str, int], merges: list[Any], always: Set[str]
) -> tuple[list[Any], dict[str, int], str]:
    """The second rule (see the module docstring): the merges and entries kept, and what to
    add to the rule's description."""
    fired = final_merges(model, entries, merges)
    if not fired.checked:
        return merges, entries, f" (the merges that never fire: kept, {fired.disagreement})"
    kept = [m for m in merges if fired.can_fire(m)]
    needed = _parts_and_results(kept, always)
    entries = {t: i for t, i in entries.items() if t not in fired.unformable or t in needed}
    return kept, entries, "; then the merges that never fire and the tokens never formed"


def _pair(merge: Any) -> tuple[str, str]:
    """A merge of the file, ``"left right"`` or ``["left", "right"]``, as its two parts."""
    left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
    return left, right


def _parts_and_results(merges: list[Any], tokens: Set[str]) -> set[str]:
    """``tokens`` and every part and result of ``merges``: entries the file must keep."""
    needed = set(tokens)
    for merge in merges:
        left, right = _pair(merge)
        needed.update((left, right, left + right))
    return needed


def _can_apply(merge: Any, reachable: Set[str]) -> bool:
    return all("<0x" in part or set(part) <= reachable for part in _pair(merge))


@dataclass(frozen=True)
class FinalMerges:
    """What BPE run on each token's own string ends with (see the module docstring)."""

    last: dict[str, tuple[str, str]]  # token -> the merge that forms it in its lone run
    unformable: set[str]  # tokens whose lone run does not end as the one token
    disagreement: str = ""  # why the simulation is not to be trusted ("" when checked)

    @property
    def checked(self) -> bool:
        return not self.disagreement

    def can_fire(self, merge: Any) -> bool:
        """False only for a merge proven never to fire: its result is formed by another
        merge, or cannot be formed at all. Tokens not simulated keep every merge."""
        left, right = _pair(merge)
        token = left + right
        if token in self.unformable:
            return False
        last = self.last.get(token)
        return last is None or last == (left, right)


def final_merges(model: dict[str, Any], vocab: dict[str, int], merges: list[Any]) -> FinalMerges:
    """Run BPE, as `tokenizers` does, on the string of every multi-character token whose
    characters are all entries, with ``merges`` in their order; then check each result
    against `tokenizers`' own BPE (the same vocabulary and merges) on the same strings."""
    from tokenizers import Tokenizer

    table: dict[tuple[int, int], tuple[int, int]] = {}
    for rank, merge in enumerate(merges):
        left, right = _pair(merge)
        a, b, result = vocab.get(left), vocab.get(right), vocab.get(left + right)
        if a is not None and b is not None and result is not None:
            table[(a, b)] = (rank, result)  # (a file with any other merge does not load)
    names = {i: token for token, i in vocab.items()}
    unknown = str(model.get("unk_token") or "")

    def _other_start(token: str) -> bool:
        return "<0x" in token or (bool(unknown) and unknown in token)

    strings: list[str] = []
    outcomes: list[list[int]] = []
    last: dict[str, tuple[str, str]] = {}
    unformable: set[str] = set()
    for token, i in vocab.items():
        if len(token) < 2 or any(c not in vocab for c in token) or _other_start(token):
            # One character; or a token that a byte-fallback or unknown symbol may begin
            # (its run starts from those, not from its characters): not simulated, all kept.
            continue
        symbols, final = _merge_all([vocab[c] for c in token], table)
        strings.append(token)
        outcomes.append(symbols)
        if symbols == [i] and final is not None:
            last[token] = (names[final[0]], names[final[1]])
        else:
            unformable.add(token)
    lone = Tokenizer.from_str(
        json.dumps({**EMPTY_TOKENIZER, "model": {**model, "vocab": vocab, "merges": merges}})
    )
    found = [encoding.ids for encoding in lone.encode_batch(strings, add_special_tokens=False)]
    wrong = sum(1 for a, b in zip(found, outcomes, strict=True) if a != b)
    if wrong:
        return FinalMerges({}, set(), f"the simulation differs from tokenizers on {wrong}")
    return FinalMerges(last, unformable)


def _merge_all(
    symbols: list[int], table: dict[tuple[int, int], tuple[int, int]]
) -> tuple[list[int], tuple[int, int] | None]:
    """`tokenizers`' ``Word::merge_all`` without dropout: the symbols left, and the last
    pair merged. The queue pops the lowest rank first, then the leftmost position; an entry
    whose pair has changed since it was queued is skipped."""
    chars = list(symbols)
    count = len(chars)
    before = list(range(-1, count - 1))
    after = [*range(1, count), -1]
    alive = [True] * count
    queue = []
    for pos in range(count - 1):
        found = table.get((chars[pos], chars[pos + 1]))
        if found is not None:
            queue.append((found[0], pos, found[1]))
    heapq.heapify(queue)
    last = None
    while queue:
        _, pos, new = heapq.heappop(queue)
        if not alive[pos] or after[pos] == -1:
            continue
        right = after[pos]
        found = table.get((chars[pos], chars[right]))
        if found is None or found[1] != new:
            continue  # expired
        last = (chars[pos], chars[right])
        chars[pos] = new
        alive[right] = False
        after[pos] = after[right]
        if after[pos] != -1:
            before[after[pos]] = pos
        for left in (before[pos], pos):
            if left >= 0 and after[left] != -1:
                found = table.get((chars[left], chars[after[left]]))
                if found is not None:
                    heapq.heappush(queue, (found[0], left, found[1]))
    return [chars[pos] for pos in range(count) if alive[pos]], last
