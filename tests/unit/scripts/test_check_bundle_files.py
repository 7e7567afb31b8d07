"""scripts/check_bundle_files.py, the image build's check of a bundle against the manifest sha256
pinned outside it: each way of tampering with the demo bundle, one at a time.

Where a case changes the manifest on purpose (a size written as a string), the pin is made for
the changed manifest, as a deploy that pinned it would have: the check must still refuse it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from siglip_text.engine.bundle import ONNX_FILE, TOKENIZER_FILE

from scripts.check_bundle_files import REQUIRED, main, problems, read_pin


def pin_of(bundle: Path) -> str:
    return hashlib.sha256((bundle / "manifest.json").read_bytes()).hexdigest()


@pytest.fixture
def bundle(tmp_path: Path, demo_dir: Path) -> Path:
    copy = tmp_path / "model"
    shutil.copytree(demo_dir, copy)
    return copy


def edit_manifest(bundle: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest, indent=2))


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_the_demo_bundle_with_its_committed_pin_passes(demo_dir: Path) -> None:
    pin = read_pin((demo_dir.parent / "demo.sha256").read_text())
    assert problems(demo_dir, pin) == []


def test_a_file_edited_together_with_its_hash_in_the_manifest_is_refused(bundle: Path) -> None:
    # GIVEN the pin export wrote, then the graph changed and the manifest re-hashed to match
    pin = pin_of(bundle)
    flip_a_byte(bundle / "text_model.onnx")
    sha256 = hashlib.sha256((bundle / "text_model.onnx").read_bytes()).hexdigest()
    edit_manifest(bundle, lambda m: m["files"]["text_model.onnx"].update(sha256=sha256))
    # THEN the manifest is refused: it is not the one pinned
    (found,) = problems(bundle, pin)
    assert found.startswith("manifest.json: sha256 "), found
    assert "the pin says" in found


def test_a_file_changed_to_the_same_size_is_refused(bundle: Path) -> None:
    pin = pin_of(bundle)
    flip_a_byte(bundle / "tokenizer.json")
    (found,) = problems(bundle, pin)
    assert found.startswith("tokenizer.json: sha256 "), found


def test_a_recorded_file_replaced_by_a_link_out_of_the_bundle_is_refused(
    bundle: Path, tmp_path: Path
) -> None:
    # GIVEN the graph moved out of the bundle and linked back: same bytes, same sha256
    pin = pin_of(bundle)
    outside = tmp_path / "elsewhere.onnx"
    (bundle / "text_model.onnx").rename(outside)
    (bundle / "text_model.onnx").symlink_to(outside)
    # THEN the link is refused
    found = problems(bundle, pin)
    assert "text_model.onnx: a symbolic link (a bundle holds plain files only)" in found, found


def test_a_link_inside_the_bundle_is_refused(bundle: Path) -> None:
    pin = pin_of(bundle)
    (bundle / "alias.json").symlink_to("tokenizer.json")
    assert problems(bundle, pin) == [
        "alias.json: a symbolic link (a bundle holds plain files only)"
    ]


def test_a_manifest_that_is_a_link_is_refused(bundle: Path, tmp_path: Path) -> None:
    pin = pin_of(bundle)
    outside = tmp_path / "manifest.json"
    (bundle / "manifest.json").rename(outside)
    (bundle / "manifest.json").symlink_to(outside)
    assert problems(bundle, pin) == ["manifest.json: missing, or not a plain file"]


def test_a_bundle_directory_that_is_a_link_is_refused(bundle: Path, tmp_path: Path) -> None:
    link = tmp_path / "linked"
    link.symlink_to(bundle)
    (found,) = problems(link, pin_of(bundle))
    assert "not a directory" in found


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("notes.txt", "notes.txt: not recorded in the manifest"),
        ("text_model.onnx.data", "text_model.onnx.data: not recorded in the manifest"),
        ("sub/", "sub: a directory (a bundle holds plain files only)"),
    ],
)
def test_an_unlisted_file_or_directory_is_refused(bundle: Path, extra: str, expected: str) -> None:
    pin = pin_of(bundle)
    if extra.endswith("/"):
        (bundle / extra).mkdir()
        (bundle / extra / "inside.bin").write_bytes(b"x")
    else:
        (bundle / extra).write_bytes(b"not from export")
    found = problems(bundle, pin)
    assert any(p.startswith(expected) for p in found), found


@pytest.mark.parametrize("size", ["248098", True, 248098.0, -1, None])
def test_a_size_that_is_not_a_whole_number_of_bytes_is_refused(bundle: Path, size: Any) -> None:
    # GIVEN a manifest whose graph size is not an integer, pinned as it is
    edit_manifest(bundle, lambda m: m["files"]["text_model.onnx"].update(size=size))
    # THEN it is refused, naming the file
    (found,) = problems(bundle, pin_of(bundle))
    assert found.startswith("text_model.onnx: the manifest's size "), found


def test_a_wrong_integer_size_is_refused(bundle: Path) -> None:
    edit_manifest(bundle, lambda m: m["files"]["tokenizer.json"].update(size=1))
    (found,) = problems(bundle, pin_of(bundle))
    assert found.startswith("tokenizer.json: ") and "the manifest says 1" in found, found


def test_a_missing_recorded_file_and_a_missing_record_are_refused(bundle: Path) -> None:
    (bundle / "tokenizer.json").unlink()
    edit_manifest(bundle, lambda m: m["files"].pop("text_model.onnx"))
    found = problems(bundle, pin_of(bundle))
    assert "text_model.onnx: the manifest records no sha256 for it" in found, found
    assert "tokenizer.json: missing from the bundle" in found, found


@pytest.mark.parametrize(
    "text",
    ["", "not a hash\n", "abc123  manifest.json\n", f"{'0' * 64}  other.json\n", f"{'0' * 64} a b"],
)
def test_a_pin_file_without_one_manifest_sha256_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        read_pin(text)


def test_a_pin_in_sha256sum_format_is_read() -> None:
    digest = "AB" * 32
    assert read_pin(f"{digest}  manifest.json\n") == digest.lower()
    assert read_pin(f"{digest} *manifest.json") == digest.lower()
    assert read_pin(digest) == digest.lower()


def test_the_command_fails_without_a_readable_pin_and_passes_with_one(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pin = tmp_path / "model.sha256"
    assert main([str(bundle), str(pin)]) == 1
    assert "the pin" in capsys.readouterr().err
    pin.write_text(f"{pin_of(bundle)}  manifest.json\n")
    assert main([str(bundle), str(pin)]) == 0
    assert main([str(bundle)]) == 2


def test_the_files_it_requires_are_the_packages_graph_and_tokenizer() -> None:
    assert REQUIRED == (ONNX_FILE, TOKENIZER_FILE)
