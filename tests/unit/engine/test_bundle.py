from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from siglip_text.engine.bundle import Manifest, check_file, load_manifest
from siglip_text.engine.errors import ModelLoadError

GOOD: dict[str, Any] = {
    "repository": "google/siglip2-base-patch16-224",
    "revision": "0123456789abcdef0123456789abcdef01234567",
    "embedding_dimension": 768,
    "text_max_token_length": 64,
}


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(data))
    return path


def test_valid_manifest_types_recorded_fields_and_keeps_unknown_ones(tmp_path: Path) -> None:
    data = {**GOOD, "precision": "int8", "files": {}, "pipeline": {"owner": "images"}}
    manifest = load_manifest(write(tmp_path, data))
    assert manifest.embedding_dimension == 768
    assert manifest.precision == "int8"
    assert manifest.extras == {"pipeline": {"owner": "images"}}


def test_manifest_written_by_the_model_reads_back_equal(tmp_path: Path) -> None:
    # GIVEN a manifest as export builds it, with a recorded file and an unknown field
    built = Manifest.model_validate(
        {
            **GOOD,
            "precision": "fp32",
            "files": {"tokenizer.json": {"sha256": "a" * 64, "size": 3}},
            "note": "kept",
        }
    )
    # WHEN it is written and read back as the runtime reads it
    path = tmp_path / "manifest.json"
    path.write_text(built.to_json())
    # THEN every field survives, typed
    assert load_manifest(path) == built
    assert load_manifest(path).recorded_file("tokenizer.json").size == 3  # type: ignore[union-attr]


def test_uppercase_revision_is_accepted_and_normalized(tmp_path: Path) -> None:
    manifest = load_manifest(write(tmp_path, {**GOOD, "revision": GOOD["revision"].upper()}))
    assert manifest.revision == GOOD["revision"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("revision", "main", "revision.*40-character"),
        ("revision", "v1.0", "revision.*40-character"),
        ("revision", "0123456789abcdef", "revision.*40-character"),
        ("revision", "g123456789abcdef0123456789abcdef01234567", "revision"),
        ("repository", "", "repository"),
        ("repository", "   ", "repository"),
        ("embedding_dimension", "768", "embedding_dimension"),
        ("embedding_dimension", 768.0, "embedding_dimension"),
        ("embedding_dimension", True, "embedding_dimension"),
        ("embedding_dimension", 0, "embedding_dimension"),
        ("text_max_token_length", -64, "text_max_token_length"),
        ("text_max_token_length", None, "text_max_token_length"),
    ],
)
def test_bad_manifest_field_fails_naming_it(
    tmp_path: Path, field: str, value: Any, message: str
) -> None:
    with pytest.raises(ModelLoadError, match=message):
        load_manifest(write(tmp_path, {**GOOD, field: value}))


@pytest.mark.parametrize("field", sorted(GOOD))
def test_missing_contract_field_fails_naming_it(tmp_path: Path, field: str) -> None:
    data = {k: v for k, v in GOOD.items() if k != field}
    with pytest.raises(ModelLoadError, match=f"{field}: Field required"):
        load_manifest(write(tmp_path, data))


def test_manifest_that_is_not_json_fails(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text("{not json")
    with pytest.raises(ModelLoadError, match="not valid JSON"):
        load_manifest(path)


def test_manifest_that_is_a_list_fails(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="must be a JSON object"):
        load_manifest(write(tmp_path, [GOOD]))


def test_missing_manifest_file_fails(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="file not found"):
        load_manifest(tmp_path / "absent.json")


def test_empty_file_fails(tmp_path: Path) -> None:
    path = tmp_path / "text_model.onnx"
    path.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="empty"):
        check_file(path, "ONNX model")


def test_directory_in_place_of_a_file_fails(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not a regular file"):
        check_file(tmp_path, "ONNX model")


def test_file_whose_size_differs_from_the_manifest_fails_as_truncated(tmp_path: Path) -> None:
    onnx = tmp_path / "text_model.onnx"
    onnx.write_bytes(b"x" * 10)
    manifest = load_manifest(
        write(tmp_path, {**GOOD, "files": {"text_model.onnx": {"size": 11, "sha256": "0" * 64}}})
    )
    with pytest.raises(ModelLoadError, match="truncated"):
        check_file(onnx, "ONNX model", manifest)
