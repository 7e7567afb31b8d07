"""`siglip-text fingerprint`: the contract fingerprint of a Hugging Face checkpoint, as the
index side computes it, without ONNX or torch.

    siglip-text fingerprint CHECKPOINT_DIR --repository google/siglip2-base-patch16-224 \\
        --revision <40-hex commit SHA>

prints ``sha256:...``, the value a bundle exported from that checkpoint records in its
manifest and its endpoint reports in ``GET /health`` (engine/fingerprint.py): whatever the
precision, since nothing in it depends on the graph. A GPU pipeline records it next to its
index with `checkpoint_fingerprint` (the standard library, plus ``tokenizers`` to tell how
the tokenizer's normalizer lowercases), and compares it with the endpoint's before switching
query traffic (docs/contract.md, "Checking a deployment against an index").

What is read: ``config.json`` (the model type), ``tokenizer.json`` (its form, with the
contract's lowercasing put before its normalizer as export writes it) and the safetensors
weights of the text tower, parsed here (an 8-byte little-endian header length, the JSON
header, then the raw tensors): each tensor's bytes are hashed as stored.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.bundle import Lowercase
from ..engine.contract import REVISION_PATTERN, Contract
from ..engine.fingerprint import (
    LowercaseMode,
    canonical_json,
    detect_lowercase,
    fingerprint,
    read_json_object,
    sha256_digest,
    tokenizer_digest,
)
from .exit_status import EXIT_OK, CheckFailed, ToolError
from .lowercase import LOWERCASE_CHOICES, lowercase_normalizer_json
from .texts import MAX_LENGTH
from .urls import service_root

#: config.json ``model_type`` of the SigLIP family; the text-only ones hold nothing else.
FULL_MODEL_TYPES = ("siglip", "siglip2")
TEXT_MODEL_TYPES = ("siglip_text_model", "siglip2_text_model")
#: The text tower's tensors in a full checkpoint (a text-only one may have it or not).
TEXT_PREFIX = "text_model."
HEAD_WEIGHT = "head.weight"
HEAD_BIAS = "head.bias"
POSITIONS = "embeddings.position_embedding.weight"
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
CHUNK = 1 << 20


@dataclass(frozen=True)
class TensorRecord:
    """Where one tensor's bytes are in a safetensors file, and what they are."""

    name: str  # as the text tower names it (without ``text_model.``)
    dtype: str
    shape: list[int]
    path: Path
    begin: int  # absolute offsets in the file
    end: int


def checkpoint_fingerprint(
    directory: Path,
    *,
    repository: str,
    revision: str,
    lowercase: Lowercase = "unicode",
    length: int = MAX_LENGTH,
) -> str:
    """The contract fingerprint of a bundle exported from this checkpoint directory (a
    ``save_pretrained`` directory or a Hub snapshot) with the same options."""
    return fingerprint(
        checkpoint_contract(
            directory, repository=repository, revision=revision, lowercase=lowercase, length=length
        )
    )


def checkpoint_contract(
    directory: Path,
    *,
    repository: str,
    revision: str,
    lowercase: Lowercase = "unicode",
    length: int = MAX_LENGTH,
) -> Contract:
    """The contract document of this checkpoint (see `checkpoint_fingerprint`); a ToolError
    names what is missing or not SigLIP."""
    import re

    if not repository.strip():
        raise ToolError("--repository must not be blank")
    if not re.fullmatch(REVISION_PATTERN, revision):
        raise ToolError(
            f"--revision {revision!r} is not a full 40-character commit SHA; tags and branch "
            "names are mutable"
        )
    if lowercase not in LOWERCASE_CHOICES:
        raise ToolError(f"--lowercase must be one of {LOWERCASE_CHOICES}, not {lowercase!r}")
    directory = Path(directory)
    model_type = _model_type(directory)
    tensors = text_tower_tensors(directory, text_only=model_type in TEXT_MODEL_TYPES)
    by_name = {t.name: t for t in tensors}
    for name in (HEAD_WEIGHT, HEAD_BIAS, POSITIONS):
        if name not in by_name:
            raise ToolError(
                f"{directory}: the text tower has no {name!r} tensor (not a SigLIP text tower)"
            )
    head = by_name[HEAD_WEIGHT].shape
    positions = by_name[POSITIONS].shape[0]
    if positions < length:
        raise ToolError(
            f"{directory}: the text tower has {positions} positions, fewer than the contract's "
            f"{length}"
        )
    served = served_tokenizer_data(
        read_json_object(directory / "tokenizer.json", ToolError), lowercase
    )
    pad_id, eos_id = _token_id(served, "<pad>"), _token_id(served, "<eos>")
    if pad_id is None or eos_id is None:
        raise ToolError(f"{directory}/tokenizer.json: no <pad> or no <eos> token")
    try:
        tokenizer_value = tokenizer_digest(served)
    except (KeyError, TypeError, ValueError) as exc:
        raise ToolError(f"{directory}/tokenizer.json: its form cannot be read ({exc})") from None
    return Contract.siglip2(
        repository=repository,
        revision=revision.lower(),
        tokenizer=tokenizer_value,
        lowercase=_lowercase_mode(served),
        eos_id=eos_id,
        pad_id=pad_id,
        length=length,
        dimension=int(head[0]),
        weights=weights_digest(tensors),
        weights_of="checkpoint-text-tower",
    )


def served_tokenizer_data(data: dict[str, Any], lowercase: Lowercase) -> dict[str, Any]:
    """The checkpoint's ``tokenizer.json`` with the contract's lowercasing before its own
    normalizer, as export writes it (tools/export/tokenizer.apply_contract)."""
    steps = lowercase_normalizer_json(lowercase)
    if steps is None:
        return data
    own = data.get("normalizer")
    normalizer = steps if own is None else {"type": "Sequence", "normalizers": [steps, own]}
    return {**data, "normalizer": normalizer}


def weights_digest(tensors: list[TensorRecord]) -> str:
    """SHA-256 of the canonical JSON of ``[[name, dtype, shape, hex sha256 of its bytes],
    ...]`` over the text tower's tensors sorted by name: the same whatever the file layout
    (one file or shards, header order, padding), and for a text-only checkpoint of the same
    tower."""
    entries = [
        [t.name, t.dtype, t.shape, _tensor_sha256(t)]
        for t in sorted(tensors, key=lambda t: t.name.encode("utf-8"))
    ]
    return sha256_digest(canonical_json(entries))


def text_tower_tensors(directory: Path, *, text_only: bool) -> list[TensorRecord]:
    """The text tower's tensors, named without ``text_model.``: in a full checkpoint those
    under it; in a text-only one, every tensor."""
    found: dict[str, TensorRecord] = {}
    for name, record in _all_tensors(directory):
        if name.startswith(TEXT_PREFIX):
            name = name[len(TEXT_PREFIX) :]
        elif not text_only:
            continue
        if name in found:
            raise ToolError(f"{directory}: tensor {name!r} appears twice")
        found[name] = TensorRecord(
            name, record.dtype, record.shape, record.path, record.begin, record.end
        )
    if not found:
        raise ToolError(f"{directory}: no text tower tensors (none named {TEXT_PREFIX}*)")
    return list(found.values())


def safetensors_header(path: Path) -> tuple[dict[str, Any], int]:
    """The header of a safetensors file and where its data begins."""
    with path.open("rb") as handle:
        head = handle.read(8)
        if len(head) != 8:
            raise ToolError(f"{path}: not a safetensors file (shorter than its header length)")
        (size,) = struct.unpack("<Q", head)
        if size > path.stat().st_size - 8:
            raise ToolError(f"{path}: not a safetensors file (header length {size})")
        try:
            header = json.loads(handle.read(size))
        except ValueError as exc:
            raise ToolError(f"{path}: the safetensors header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ToolError(f"{path}: the safetensors header is not a JSON object")
    return header, 8 + size


def _all_tensors(directory: Path) -> Iterator[tuple[str, TensorRecord]]:
    if (directory / SINGLE_FILE).is_file():
        files = [directory / SINGLE_FILE]
    elif (directory / INDEX_FILE).is_file():
        weight_map = read_json_object(directory / INDEX_FILE, ToolError).get("weight_map")
        if not isinstance(weight_map, dict):
            raise ToolError(f"{directory / INDEX_FILE}: no weight_map")
        files = [directory / name for name in sorted(set(map(str, weight_map.values())))]
    else:
        raise ToolError(
            f"{directory}: no {SINGLE_FILE} or {INDEX_FILE}; the fingerprint reads safetensors "
            "weights (a pytorch_model.bin needs torch to read: save the checkpoint with "
            "safe_serialization=True)"
        )
    for path in files:
        header, start = safetensors_header(path)
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            try:
                begin, end = (int(x) for x in entry["data_offsets"])
                record = TensorRecord(
                    name,
                    str(entry["dtype"]),
                    [int(d) for d in entry["shape"]],
                    path,
                    start + begin,
                    start + end,
                )
            except (KeyError, TypeError, ValueError):
                raise ToolError(f"{path}: tensor {name!r} has a malformed header entry") from None
            yield name, record


def _tensor_sha256(tensor: TensorRecord) -> str:
    digest = hashlib.sha256()
    with tensor.path.open("rb") as handle:
        handle.seek(tensor.begin)
        left = tensor.end - tensor.begin
        while left > 0:
            block = handle.read(min(CHUNK, left))
            if not block:
                raise ToolError(f"{tensor.path}: ends inside tensor {tensor.name!r} (truncated)")
            digest.update(block)
            left -= len(block)
    return digest.hexdigest()


def _model_type(directory: Path) -> str:
    config = read_json_object(directory / "config.json", ToolError)
    model_type = config.get("model_type")
    if model_type not in FULL_MODEL_TYPES + TEXT_MODEL_TYPES:
        raise ToolError(
            f"{directory}/config.json: model_type {model_type!r} is not a SigLIP model "
            f"(expected one of {sorted(FULL_MODEL_TYPES + TEXT_MODEL_TYPES)})"
        )
    return str(model_type)


def _token_id(data: dict[str, Any], token: str) -> int | None:
    for added in data.get("added_tokens") or []:
        if added.get("content") == token:
            return int(added["id"])
    vocab = (data.get("model") or {}).get("vocab")
    if isinstance(vocab, dict) and token in vocab:
        return int(vocab[token])
    return None


def _lowercase_mode(data: dict[str, Any]) -> LowercaseMode:
    """How the served normalizer lowercases, told as init tells it (its behaviour on the
    probe texts of engine/fingerprint.detect_lowercase), with the ``tokenizers`` library."""
    from tokenizers import Tokenizer

    normalizer_data = data.get("normalizer")
    if normalizer_data is None:
        return detect_lowercase(lambda text: text)
    probe = {
        "version": "1.0",
        "normalizer": normalizer_data,
        "model": {"type": "BPE", "vocab": {}, "merges": []},
    }
    try:
        normalizer = Tokenizer.from_str(json.dumps(probe)).normalizer
    except Exception as exc:  # tokenizers raises plain Exception on a bad normalizer
        raise ToolError(f"tokenizer.json: its normalizer cannot be loaded ({exc})") from None
    assert normalizer is not None
    return detect_lowercase(normalizer.normalize_str)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "checkpoint",
        type=Path,
        metavar="CHECKPOINT",
        help="a Hugging Face checkpoint directory (save_pretrained or a Hub snapshot)",
    )
    parser.add_argument(
        "--repository", required=True, help="the Hub model id (as the manifest records it)"
    )
    parser.add_argument(
        "--revision", required=True, help="the full 40-character commit SHA of the checkpoint"
    )
    parser.add_argument(
        "--lowercase",
        choices=LOWERCASE_CHOICES,
        default="unicode",
        help="the lowercasing the bundle was exported with (export's --lowercase; unicode)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the contract document and its fingerprint as JSON",
    )
    parser.add_argument(
        "--url",
        help="an endpoint's base URL (what OpenAI clients take, /v1 or not): compare its "
        "GET /health fingerprint with the checkpoint's; exit 1 when they differ",
    )


def run(args: argparse.Namespace) -> int:
    contract = checkpoint_contract(
        args.checkpoint,
        repository=args.repository,
        revision=args.revision,
        lowercase=args.lowercase,
    )
    expected = fingerprint(contract)
    if args.json:
        document = {"fingerprint": expected, "contract": contract.model_dump(mode="json")}
        json.dump(document, sys.stdout, indent=2, ensure_ascii=False)
        print()
    else:
        print(expected)
    if args.url:
        served = endpoint_fingerprint(args.url)
        if served != expected:
            raise CheckFailed(
                f"{args.url} serves contract {served}, not this checkpoint's {expected}: its "
                "vectors do not belong in an index built from this checkpoint"
            )
        print(f"{args.url} serves this contract", file=sys.stderr)
    return EXIT_OK


def endpoint_fingerprint(url: str, *, timeout: float = 30.0) -> str | None:
    """The ``fingerprint`` an endpoint's ``GET /health`` reports (None when it reports none)."""
    import urllib.error
    import urllib.request

    base = service_root(url)
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=timeout) as response:
            body = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ToolError(f"{base}/health: cannot be read ({exc})") from None
    value = body.get("fingerprint") if isinstance(body, dict) else None
    return value if isinstance(value, str) else None
