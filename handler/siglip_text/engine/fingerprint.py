"""The contract fingerprint (``sha256:`` + 64 hex: the SHA-256 of the contract document's
canonical JSON, RFC 8785), and init's check of what a bundle serves against what its
manifest records (`check_contract`). docs/contract.md defines each field and the
serialization; tools/checkpoint_fingerprint.py computes the same from a checkpoint.
"""

from __future__ import annotations

import decimal
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from operator import itemgetter, methodcaller
from pathlib import Path
from typing import Literal

from .bundle import BundlePaths, Manifest, sha256_file
from .contract import Contract, WeightsOf
from .errors import ModelLoadError
from .json_value import JSONObject, JSONValue
from .tokenization import EOS_TOKEN, PAD_TOKEN, SiglipTokenizer

#: The contract's ids (docs/contract.md section 1): every SigLIP 2 checkpoint has them.
PAD_ID = 0
EOS_ID = 1
#: Strings that must stay text when a user types them (tokenized as their characters).
SPECIAL_STRINGS = ("<pad>", "<eos>", "<bos>", "<unk>")

LowercaseMode = Literal["unicode", "ascii", "none", "other"]

#: Probe texts of `detect_lowercase`: each is normalized beside its lowercased form.
ASCII_PROBE = ("AZ", "az")
NON_ASCII_PROBE = ("ÀΩ", "àω")
#: Python's str.lower writes a word-final capital sigma as ς, others as σ.
SIGMA_PROBES = (("ΟΔΟΣ", "οδος"), ("ΣΑ", "σα"))

#: Defaults of a BPE model's fields (`tokenizers`), filled in so that a file that leaves
#: one out and a file that writes it have the same form.
BPE_DEFAULTS: JSONObject = {
    "dropout": None,
    "unk_token": None,
    "continuing_subword_prefix": None,
    "end_of_word_suffix": None,
    "fuse_unk": False,
    "byte_fallback": False,
    "ignore_merges": False,
}
ADDED_TOKEN_FIELDS = ("id", "content", "single_word", "lstrip", "rstrip", "normalized", "special")


# --- the serialization -------------------------------------------------------------------


def canonical_json(value: JSONValue) -> bytes:
    """RFC 8785 (JSON Canonicalization Scheme) for JSON values: object keys sorted by their
    UTF-16 code units, no whitespace, strings with only the escapes JSON requires (``\\"``,
    ``\\\\``, ``\\b \\f \\n \\r \\t``, other controls as ``\\u00xx``), numbers as ECMAScript
    writes them; UTF-8."""
    return _canonical(value).encode("utf-8")


def _canonical(value: JSONValue) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Mapping):
        keys = sorted(value, key=_utf16)
        return "{" + ",".join(f"{_string(k)}:{_canonical(value[k])}" for k in keys) + "}"
    if isinstance(value, _Rows):
        # json.dumps writes strings and integers as RFC 8785 does (the same escapes, no
        # others): a vocabulary or a merge list in C, not item by item.
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, list | tuple):
        return "[" + ",".join(_canonical(item) for item in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


class _Rows(list[tuple[str, int] | list[str]]):
    """A list of ``[token, id]`` or ``[left, right]`` rows, checked to hold only strings and
    integers (`_vocab_rows`, `_merge_rows`)."""


def _utf16(key: JSONValue) -> bytes:
    if not isinstance(key, str):
        raise TypeError(f"object keys must be strings, not {type(key).__name__}")
    return key.encode("utf-16-be")


_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _string(text: str) -> str:
    text.encode("utf-8")  # a lone surrogate has no UTF-8 form: refused here
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _number(value: float) -> str:
    """ECMAScript's Number::toString (what RFC 8785 requires) from the shortest digits that
    read back as ``value`` (Python's repr finds the same digits)."""
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("NaN and infinity have no JSON form")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    shortest = decimal.Decimal(repr(abs(value))).normalize()
    _, digit_tuple, exponent = shortest.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    k = len(digits)
    n = k + exponent  # value = 0.digits x 10^n
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        e = n - 1
        mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
        body = f"{mantissa}e{'+' if e > 0 else '-'}{abs(e)}"
    return sign + body


def sha256_digest(data: bytes) -> str:
    """``sha256:`` and the 64 lowercase hex digits of SHA-256 of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def contract_document(contract: Contract) -> JSONObject:
    """The document the fingerprint is taken over: the contract's fields, as JSON values."""
    document: JSONObject = contract.model_dump(mode="json")
    return document


def fingerprint(contract: Contract) -> str:
    """``sha256:`` + hex SHA-256 of the contract document's canonical JSON."""
    return sha256_digest(canonical_json(contract_document(contract)))


# --- the tokenizer's form ----------------------------------------------------------------


def tokenizer_form(data: Mapping[str, JSONValue]) -> JSONObject:
    """What of a ``tokenizer.json`` decides the ids of a text, in a form that no formatting,
    key order or equivalent spelling changes: the normalizer and the pre-tokenizer (nested
    ``Sequence`` steps flattened; a sequence of one step is that step, of none is null), the
    model (BPE defaults filled in, the vocabulary as ``[token, id]`` pairs by id, merges as
    ``[left, right]`` pairs in rank order), the added tokens by id. The post-processor,
    padding, truncation and decoder are left out: the server applies the contract's own
    rules in their place."""
    model = data.get("model")
    if not isinstance(model, Mapping):
        raise ValueError("tokenizer.json has no model")
    added = data.get("added_tokens") or []
    return {
        "added_tokens": sorted((_added_token(t) for t in added), key=lambda t: int(t["id"])),
        "model": _model_form(model),
        "normalizer": _steps(data.get("normalizer"), "normalizers"),
        "pre_tokenizer": _steps(data.get("pre_tokenizer"), "pretokenizers"),
    }


def tokenizer_digest(data: Mapping[str, JSONValue]) -> str:
    """``sha256:`` + hex SHA-256 of `tokenizer_form`'s canonical JSON."""
    return sha256_digest(canonical_json(tokenizer_form(data)))


def _added_token(token: Mapping[str, JSONValue]) -> JSONObject:
    special = bool(token.get("special", False))
    defaults = {"single_word": False, "lstrip": False, "rstrip": False, "special": special}
    defaults["normalized"] = not special
    return {name: token.get(name, defaults.get(name)) for name in ADDED_TOKEN_FIELDS}


def _model_form(model: Mapping[str, JSONValue]) -> JSONObject:
    form = dict(model)
    if form.get("type") == "BPE":
        form = {**BPE_DEFAULTS, **form}
        form["merges"] = _merge_rows(form.get("merges") or [])
    vocab = form.get("vocab")
    if isinstance(vocab, Mapping):
        form["vocab"] = _vocab_rows(vocab)
    return form


def _vocab_rows(vocab: Mapping[str, JSONValue]) -> list[JSONValue]:
    """``[token, id]`` pairs by id (the checks run at C speed: Gemma has 256,000 entries)."""
    if not set(map(type, vocab.values())) <= {int} or not set(map(type, vocab)) <= {str}:
        raise ValueError("tokenizer.json: the vocabulary maps strings to integer ids")
    return _Rows(sorted(vocab.items(), key=itemgetter(1)))


def _merge_rows(merges: Sequence[JSONValue]) -> list[JSONValue]:
    """Merges as ``[left, right]`` pairs in rank order, whichever way the file writes them
    (``"left right"`` strings or pairs)."""
    kinds = set(map(type, merges))
    if kinds <= {str}:
        rows = list(map(methodcaller("split", " ", 1), merges))
    elif kinds <= {list}:
        rows = list(merges)
    else:
        raise ValueError("tokenizer.json: each merge is a string or a pair of strings")
    if rows and (set(map(len, rows)) != {2} or set(map(type, chain.from_iterable(rows))) != {str}):
        raise ValueError("tokenizer.json: each merge is a pair of strings")
    return _Rows(rows)


def _steps(node: JSONValue, key: str) -> JSONValue:
    """A normalizer or pre-tokenizer with its ``Sequence`` steps flattened."""
    steps = _flatten(node, key)
    if not steps:
        return None
    if len(steps) == 1:
        return steps[0]
    return {"type": "Sequence", key: steps}


def _flatten(node: JSONValue, key: str) -> list[JSONValue]:
    if node is None:
        return []
    if isinstance(node, Mapping) and node.get("type") == "Sequence":
        return [step for child in node.get(key) or [] for step in _flatten(child, key)]
    return [node]


# --- what the served artifacts do --------------------------------------------------------


def detect_lowercase(normalize: Callable[[str], str]) -> LowercaseMode:
    """How a normalizer lowercases, from what it does to probe texts: ``unicode`` as Python's
    ``str.lower`` (final sigma included), ``ascii`` A-Z only, ``other`` non-ASCII too but not
    as ``str.lower`` (``tokenizers``' bare ``Lowercase``), ``none`` not at all."""

    def same(pair: tuple[str, str]) -> bool:
        return normalize(pair[0]) == normalize(pair[1])

    if not same(ASCII_PROBE):
        return "none"
    if not same(NON_ASCII_PROBE):
        return "ascii"
    if all(same(pair) for pair in SIGMA_PROBES):
        return "unicode"
    return "other"


def onnx_files(paths: BundlePaths) -> list[Path]:
    """The graph and, when there is one, its weights file (``text_model.onnx.data``)."""
    found = [paths.onnx]
    data = paths.onnx.with_name(paths.onnx.name + ".data")
    if data.is_file():
        found.append(data)
    return found


def onnx_weights_digest(files: Sequence[Path]) -> str:
    """A bundle's weights as served, for a bundle that records no checkpoint: SHA-256 of the
    canonical JSON of ``[[file name, hex sha256 of its bytes], ...]`` in the given order."""
    return sha256_digest(canonical_json([[f.name, sha256_file(f)] for f in files]))


def served_contract(manifest: Manifest, paths: BundlePaths, tokenizer: SiglipTokenizer) -> Contract:
    """The contract of what this bundle serves, refusing what the contract forbids (see the
    module docstring); a ModelLoadError names the difference."""
    where = f"tokenizer {paths.tokenizer}"
    if (tokenizer.pad_id, tokenizer.eos_id) != (PAD_ID, EOS_ID):
        raise ModelLoadError(
            f"{where}: {PAD_TOKEN} has id {tokenizer.pad_id} and {EOS_TOKEN} id "
            f"{tokenizer.eos_id}; the SigLIP 2 contract pads with id {PAD_ID} and ends a text "
            f"with id {EOS_ID} (the graph's token table is indexed by them)"
        )
    if tokenizer.bpe_dropout:
        raise ModelLoadError(
            f"{where}: the BPE model has dropout {tokenizer.bpe_dropout}, which makes the ids "
            "of a text random; the contract's tokenizer has none"
        )
    for special in SPECIAL_STRINGS:
        control = tokenizer.token_id(special)
        if control is not None and tokenizer.content_ids(special) == [control]:
            raise ModelLoadError(
                f"{where}: the text {special!r} becomes the control token {control}; "
                "special-token strings typed in a text must stay text (the token is not "
                "marked special in tokenizer.json)"
            )
    record = manifest.contract
    lowercase = detect_lowercase(tokenizer.normalize)
    declared = record.lowercase if record is not None else manifest.lowercase
    if declared is None and lowercase == "none":
        raise ModelLoadError(
            f"{where}: its normalizer does not lowercase ('A Photo' and 'a photo' get different "
            "ids); SigLIP 2 was trained on lowercased text. Export the checkpoint with "
            "siglip-text export, which writes the lowercasing into tokenizer.json, or add it "
            "(docs/contract.md)"
        )
    if declared is not None and lowercase != declared:
        raise ModelLoadError(
            f"{where}: the manifest declares lowercase {declared!r}, but the tokenizer's "
            f"normalizer does {lowercase!r} (tokenizer.json is not the one the manifest "
            "describes)"
        )
    weights_of: WeightsOf
    if record is None:
        try:
            tokenizer_value = tokenizer_digest(
                read_json_object(paths.tokenizer, ModelLoadError, what="tokenizer")
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelLoadError(f"{where}: its form cannot be read ({exc})") from None
        weights, weights_of = onnx_weights_digest(onnx_files(paths)), "onnx-files"
    else:
        _check_recorded_file(manifest, paths.tokenizer)
        tokenizer_value = record.tokenizer
        weights, weights_of = record.weights, record.weights_of
        if weights_of == "onnx-files":
            weights = onnx_weights_digest(onnx_files(paths))
    return Contract.siglip2(
        repository=manifest.repository,
        revision=manifest.revision,
        tokenizer=tokenizer_value,
        lowercase=lowercase,
        eos_id=tokenizer.eos_id,
        pad_id=tokenizer.pad_id,
        length=manifest.text_max_token_length,
        dimension=manifest.embedding_dimension,
        weights=weights,
        weights_of=weights_of,
    )


def check_contract(manifest: Manifest, paths: BundlePaths, tokenizer: SiglipTokenizer) -> str:
    """Init's contract check: the fingerprint of what the bundle serves, after refusing a
    bundle whose manifest records another contract or an edited fingerprint.

    What init checks, whether export made the bundle or not (a bundle in the seed's four-field
    format is checked, not trusted): the tokenizer lowercases as declared (or at all, when
    nothing is declared), by its behaviour on probe texts (`detect_lowercase`); ``<pad>`` is 0
    and ``<eos>`` is 1; special-token strings typed in a text stay text; the BPE model has no
    dropout. BOS, padding, truncation and the attention mask are the server's own rules
    (tokenization.py, encoder.py), whatever ``tokenizer.json`` says, so they are enforced. What
    init cannot recompute from a bundle export made (the checkpoint's weights; the tokenizer
    before export pruned it) it takes from the record, tied to the files by their sha256.
    """
    served = served_contract(manifest, paths, tokenizer)
    found = fingerprint(served)
    record, recorded = manifest.contract, manifest.fingerprint
    if record is None and recorded is None:
        return found
    where = f"manifest {paths.manifest}"
    if record is None or recorded is None:
        missing = "contract" if record is None else "fingerprint"
        raise ModelLoadError(
            f"{where}: records a {'fingerprint' if record is None else 'contract'} without its "
            f"{missing}; both or neither"
        )
    if fingerprint(record) != recorded:
        raise ModelLoadError(
            f"{where}: fingerprint {recorded} is not the digest of its contract record "
            f"({fingerprint(record)}): the manifest was edited"
        )
    differences = _differences(contract_document(record), contract_document(served))
    if differences:
        raise ModelLoadError(
            f"{where}: the bundle does not serve the contract it records ({differences}); "
            "its vectors would not match an index built with that contract"
        )
    return found


def _differences(recorded: Mapping[str, JSONValue], served: Mapping[str, JSONValue]) -> str:
    names = sorted(set(recorded) | set(served))
    return "; ".join(
        f"{name}: recorded {recorded.get(name)!r}, served {served.get(name)!r}"
        for name in names
        if recorded.get(name) != served.get(name)
    )


def _check_recorded_file(manifest: Manifest, path: Path) -> None:
    """The file is the one export wrote, when the manifest records its sha256."""
    entry = manifest.recorded_file(path.name)
    if entry is None or entry.sha256 is None:
        return
    actual = sha256_file(path)
    if actual != entry.sha256.lower():
        raise ModelLoadError(
            f"{path}: sha256 {actual} differs from the manifest's {entry.sha256}: not the "
            "file export wrote, so the contract the manifest records cannot be its own"
        )


def read_json_object(
    path: Path, error: Callable[[str], Exception], *, what: str = ""
) -> JSONObject:
    """A JSON file that must hold an object, for the bundle's check and the checkpoint's
    tool alike; each failure is ``error`` of a message naming ``what`` and the path."""
    where = f"{what} {path}" if what else str(path)
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise error(f"{where}: not found") from None
    except (OSError, ValueError) as exc:
        raise error(f"{where}: cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise error(f"{where}: not a JSON object")
    return data
