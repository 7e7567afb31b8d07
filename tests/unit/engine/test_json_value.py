"""The type of a JSON value (json_value.py). `JSONValue` is `Any`, so the type checker cannot
hold a value annotated `JSONObject` to being JSON; this does, at run time, for the reader that
returns one (`fingerprint.read_json_object`) and for the values the package annotates so and
hands to `json.dumps` or the canonical JSON of the fingerprint."""

from __future__ import annotations

import json
import math
import typing
from pathlib import Path

import pytest
from siglip_text.engine.bundle import BundlePaths
from siglip_text.engine.errors import ModelLoadError
from siglip_text.engine.fingerprint import (
    BPE_DEFAULTS,
    canonical_json,
    contract_document,
    read_json_object,
    served_contract,
    tokenizer_form,
)
from siglip_text.engine.json_value import JSONObject, JSONValue
from siglip_text.engine.self_check import expected_probe
from siglip_text.engine.service import EmbeddingService


def non_json(value: object, where: str = "$") -> list[str]:
    """Where ``value`` holds something that is not a JSON value as `json.loads` builds them
    and `json.dumps` takes them: dicts with str keys, lists (tuples too: the fingerprint's
    rows, which `json.dumps` writes as arrays), str, finite int and float, bool, None."""
    if value is None or isinstance(value, (str, bool, int)):
        return []
    if isinstance(value, float):
        return [] if math.isfinite(value) else [f"{where}: {value}"]
    if isinstance(value, list | tuple):
        return [p for i, item in enumerate(value) for p in non_json(item, f"{where}[{i}]")]
    if isinstance(value, dict):
        return [
            problem
            for key, item in value.items()
            for problem in (
                [f"{where}: key {key!r} is a {type(key).__name__}"]
                if not isinstance(key, str)
                else non_json(item, f"{where}.{key}")
            )
        ]
    return [f"{where}: a {type(value).__name__}"]


def is_json_object(value: object) -> bool:
    return isinstance(value, dict) and not non_json(value)


def test_a_json_object_is_a_dict_with_str_keys() -> None:
    assert typing.get_origin(JSONObject) is dict
    assert typing.get_args(JSONObject) == (str, JSONValue)


def test_the_check_here_tells_json_from_what_is_not() -> None:
    assert is_json_object({"a": [1, 2.5, "x", None, True, {"b": []}]})
    assert not is_json_object([1])
    assert non_json({1: "x"}) and non_json({"a": {1, 2}}) and non_json({"a": float("nan")})
    assert non_json({"a": Path("x")}) and non_json({"a": b"x"})


@pytest.mark.parametrize("name", ["manifest.json", "tokenizer.json"])
def test_the_bundles_json_files_are_read_as_json_objects(demo_dir: Path, name: str) -> None:
    document = read_json_object(demo_dir / name, ModelLoadError)
    assert is_json_object(document)
    assert document == json.loads((demo_dir / name).read_text())


def test_a_json_file_holding_no_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text("[1, 2]")
    with pytest.raises(ModelLoadError, match="not a JSON object"):
        read_json_object(path, ModelLoadError, what="manifest")


def test_what_the_package_annotates_a_json_object_is_json(
    service: EmbeddingService, demo_dir: Path
) -> None:
    paths = BundlePaths.in_dir(demo_dir)
    tokenizer = read_json_object(paths.tokenizer, ModelLoadError)
    contract = served_contract(service.manifest, paths, service.tokenizer)
    documents: dict[str, JSONObject] = {
        "EmbeddingService.describe": service.describe(),
        "fingerprint.BPE_DEFAULTS": BPE_DEFAULTS,
        "fingerprint.contract_document": contract_document(contract),
        "fingerprint.tokenizer_form": tokenizer_form(tokenizer),
        "self_check.expected_probe": expected_probe(service.manifest, "a photo of a cat"),
    }
    for name, document in documents.items():
        assert isinstance(document, dict), name
        assert non_json(document, name) == []
        # json.dumps writes it, and what it wrote reads back as the same JSON value
        assert canonical_json(json.loads(json.dumps(document))) == canonical_json(document)
