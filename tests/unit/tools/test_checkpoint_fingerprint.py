"""tools/checkpoint_fingerprint.py: a checkpoint's contract from its files, without torch or the
safetensors library: checkpoints are written here byte by byte (header length, JSON header,
raw tensors), as the safetensors format defines them."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from siglip_text.cli import main
from siglip_text.tools.checkpoint_fingerprint import checkpoint_contract, checkpoint_fingerprint
from siglip_text.tools.exit_status import ToolError

REPOSITORY = "test/siglip-handmade"
REVISION = "0123456789abcdef0123456789abcdef01234567"
HIDDEN, HEAD, POSITIONS = 4, 6, 64


def tower(seed: int = 0) -> dict[str, np.ndarray]:
    """The tensors of a (very small) SigLIP text tower, by the tower's own names."""
    rng = np.random.default_rng(seed)
    return {
        "embeddings.token_embedding.weight": rng.standard_normal((990, HIDDEN), np.float32),
        "embeddings.position_embedding.weight": rng.standard_normal(
            (POSITIONS, HIDDEN), np.float32
        ),
        "final_layer_norm.weight": np.ones(HIDDEN, np.float32),
        "final_layer_norm.bias": np.zeros(HIDDEN, np.float32),
        "head.weight": rng.standard_normal((HEAD, HIDDEN), np.float32),
        "head.bias": rng.standard_normal(HEAD, np.float32),
    }


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], *, reverse: bool = False) -> None:
    names = sorted(tensors, reverse=reverse)
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name in names:
        size = tensors[name].nbytes
        header[name] = {
            "dtype": {"float32": "F32", "float16": "F16"}[str(tensors[name].dtype)],
            "shape": list(tensors[name].shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw)
        for name in names:
            handle.write(tensors[name].tobytes())


def checkpoint(
    directory: Path,
    demo_dir: Path,
    *,
    model_type: str = "siglip",
    text: dict[str, np.ndarray] | None = None,
    vision_seed: int = 1,
    shards: int = 1,
    prefix: str = "text_model.",
) -> Path:
    """A checkpoint directory: config.json, the demo's tokenizer without its lowercasing (as
    a Hub tokenizer ships), and the weights in one file or several."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"model_type": model_type}))
    tokenizer = json.loads((demo_dir / "tokenizer.json").read_text("utf-8"))
    tokenizer["normalizer"] = tokenizer["normalizer"]["normalizers"][-1]
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), "utf-8")
    tensors = {prefix + name: value for name, value in (text or tower()).items()}
    if model_type in ("siglip", "siglip2"):
        rng = np.random.default_rng(vision_seed)
        tensors["vision_model.head.weight"] = rng.standard_normal((3, 3), np.float32)
        tensors["logit_scale"] = np.ones(1, np.float32)
    if shards == 1:
        write_safetensors(directory / "model.safetensors", tensors)
        return directory
    names = sorted(tensors)
    weight_map = {}
    for shard in range(shards):
        part = {n: tensors[n] for n in names[shard::shards]}
        file = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(directory / file, part, reverse=True)
        weight_map.update(dict.fromkeys(part, file))
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return directory


def value(directory: Path, **options: Any) -> str:
    return checkpoint_fingerprint(
        directory,
        repository=options.pop("repository", REPOSITORY),
        revision=options.pop("revision", REVISION),
        **options,
    )


def test_the_contract_is_read_from_the_files(tmp_path: Path, demo_dir: Path) -> None:
    contract = checkpoint_contract(
        checkpoint(tmp_path / "c", demo_dir), repository=REPOSITORY, revision=REVISION
    )
    assert contract.dimension == HEAD  # the head's output width
    assert (contract.pad_id, contract.eos_id, contract.length) == (0, 1, 64)
    assert contract.lowercase == "unicode" and contract.weights_of == "checkpoint-text-tower"


def test_the_weights_digest_does_not_depend_on_the_file_layout(
    tmp_path: Path, demo_dir: Path
) -> None:
    one = value(checkpoint(tmp_path / "one", demo_dir))
    assert value(checkpoint(tmp_path / "shards", demo_dir, shards=3)) == one
    # the same tower saved alone, with or without the text_model. prefix
    assert (
        value(checkpoint(tmp_path / "alone", demo_dir, model_type="siglip2_text_model", prefix=""))
        == one
    )
    assert (
        value(checkpoint(tmp_path / "alone-prefixed", demo_dir, model_type="siglip_text_model"))
        == one
    )


def test_the_image_tower_is_not_part_of_it(tmp_path: Path, demo_dir: Path) -> None:
    assert value(checkpoint(tmp_path / "a", demo_dir, vision_seed=1)) == value(
        checkpoint(tmp_path / "b", demo_dir, vision_seed=2)
    )


def test_it_differs_for_other_text_weights_dtype_revision_or_lowercasing(
    tmp_path: Path, demo_dir: Path
) -> None:
    base = checkpoint(tmp_path / "base", demo_dir)
    found = {value(base)}
    changed = tower()
    changed["head.bias"] = changed["head.bias"] + np.float32(1e-3)
    found.add(value(checkpoint(tmp_path / "weights", demo_dir, text=changed)))
    half = {k: v.astype(np.float16) for k, v in tower().items()}
    found.add(value(checkpoint(tmp_path / "fp16", demo_dir, text=half)))
    found.add(value(base, revision="f" * 40))
    found.add(value(base, lowercase="none"))
    found.add(value(base, lowercase="ascii"))
    assert len(found) == 6


def test_a_changed_tokenizer_changes_it(tmp_path: Path, demo_dir: Path) -> None:
    base = checkpoint(tmp_path / "base", demo_dir)
    other = tmp_path / "other"
    shutil.copytree(base, other)
    data = json.loads((other / "tokenizer.json").read_text("utf-8"))
    data["model"]["merges"] = data["model"]["merges"][:-1]
    (other / "tokenizer.json").write_text(json.dumps(data, indent=1), "utf-8")
    assert value(other) != value(base)


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        ("no head", "no 'head.weight' tensor"),
        ("bin only", "no model.safetensors"),
        ("not siglip", "is not a SigLIP model"),
        ("truncated", "ends inside tensor"),
        ("few positions", "fewer than the contract's 64"),
    ],
)
def test_what_it_cannot_read_is_named(
    tmp_path: Path, demo_dir: Path, breakage: str, message: str
) -> None:
    text = tower()
    if breakage == "no head":
        del text["head.weight"]
    if breakage == "few positions":
        text["embeddings.position_embedding.weight"] = text["embeddings.position_embedding.weight"][
            :16
        ]
    directory = checkpoint(tmp_path / "c", demo_dir, text=text)
    if breakage == "bin only":
        (directory / "model.safetensors").rename(directory / "pytorch_model.bin")
    if breakage == "not siglip":
        (directory / "config.json").write_text(json.dumps({"model_type": "clip"}))
    if breakage == "truncated":
        path = directory / "model.safetensors"
        path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ToolError, match=message):
        value(directory)


def test_the_command_prints_it(tmp_path: Path, demo_dir: Path, capsys: Any) -> None:
    directory = checkpoint(tmp_path / "c", demo_dir)
    argv = ["fingerprint", str(directory), "--repository", REPOSITORY, "--revision", REVISION]
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == value(directory)
    assert main([*argv, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["fingerprint"] == value(directory)
    assert printed["contract"]["revision"] == REVISION
    assert main([*argv[:-1], "main"]) == 2  # a branch name is refused
