"""The contract fingerprint of a real (tiny, random) checkpoint, from both sides: what
`siglip-text fingerprint` computes from the checkpoint's files (no ONNX, no torch), what
`siglip-text export` records for fp32 and for int8, and what init and ``GET /health``
report. Equal across precisions and sides; different for another revision, lowercasing,
tokenizer or text weights; an edited record is refused.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

for _module in ("torch", "transformers", "onnx"):
    pytest.importorskip(
        _module,
        reason="needs the export extra: pip install torch==2.13.0 -e '.[export]'",
    )

from fastapi.testclient import TestClient  # noqa: E402
from siglip_text.cli import main  # noqa: E402
from siglip_text.engine.errors import ModelLoadError  # noqa: E402
from siglip_text.engine.fingerprint import tokenizer_digest  # noqa: E402
from siglip_text.engine.service import EmbeddingService  # noqa: E402
from siglip_text.http.app import create_app  # noqa: E402
from siglip_text.settings import load_service, load_settings  # noqa: E402
from siglip_text.tools.checkpoint_fingerprint import (  # noqa: E402
    checkpoint_fingerprint,
    safetensors_header,
)

from devkit.servers import serving  # noqa: E402
from devkit.tiny_checkpoint import (  # noqa: E402
    REPOSITORY,
    REVISION,
    export_tiny,
    make_tiny_checkpoint,
)

pytestmark = [pytest.mark.export, pytest.mark.slow]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_checkpoint(tmp_path_factory.mktemp("fingerprint") / "checkpoint")


@pytest.fixture(scope="module")
def bundles(checkpoint: Path) -> dict[str, Path]:
    found = {}
    for precision in ("fp32", "int8"):
        out = checkpoint.parent / precision
        assert export_tiny(checkpoint, out, "--precision", precision) == 0
        found[precision] = out
    return found


def manifest(bundle: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((bundle / "manifest.json").read_text())
    return data


def load(bundle: Path) -> EmbeddingService:
    return load_service(load_settings(model_dir=bundle, ort_intra_op_threads=1))


def from_checkpoint(directory: Path, **options: Any) -> str:
    return checkpoint_fingerprint(directory, repository=REPOSITORY, revision=REVISION, **options)


def test_fp32_int8_and_the_checkpoint_give_one_fingerprint(
    checkpoint: Path, bundles: dict[str, Path], capsys: Any
) -> None:
    # GIVEN the index side's value, printed by the command from the checkpoint's files
    argv = ["fingerprint", str(checkpoint), "--repository", REPOSITORY, "--revision", REVISION]
    assert main(argv) == 0
    printed = capsys.readouterr().out.strip()
    assert printed.startswith("sha256:") and len(printed) == 71
    # THEN both bundles record it, init recomputes it and /health reports it
    for bundle in bundles.values():
        assert manifest(bundle)["fingerprint"] == printed
        service = load(bundle)
        assert service.fingerprint == printed
        with TestClient(create_app(service, load_settings(model_dir=bundle))) as client:
            assert client.get("/health").json()["fingerprint"] == printed
    assert manifest(bundles["fp32"])["contract"] == manifest(bundles["int8"])["contract"]
    assert manifest(bundles["int8"])["contract"]["weights_of"] == "checkpoint-text-tower"


def test_the_recorded_tokenizer_digest_is_that_of_the_tokenizer_served(
    bundles: dict[str, Path],
) -> None:
    # export writes the checkpoint's tokenizer with the contract's lowercasing in front;
    # nothing was pruned from this small one, so the served file has the recorded form
    bundle = bundles["fp32"]
    assert "tokenizer_merges" not in manifest(bundle)
    served = json.loads((bundle / "tokenizer.json").read_text("utf-8"))
    assert tokenizer_digest(served) == manifest(bundle)["contract"]["tokenizer"]


def overwrite_tensor(directory: Path, name: str) -> None:
    """Flip one byte inside tensor ``name`` of the checkpoint's safetensors file."""
    path = directory / "model.safetensors"
    header, start = safetensors_header(path)
    begin, _ = header[name]["data_offsets"]
    data = bytearray(path.read_bytes())
    data[start + begin] ^= 0x01
    path.write_bytes(bytes(data))


def test_text_weights_change_it_image_weights_do_not(checkpoint: Path, tmp_path: Path) -> None:
    base = from_checkpoint(checkpoint)
    text, image = tmp_path / "text", tmp_path / "image"
    shutil.copytree(checkpoint, text)
    shutil.copytree(checkpoint, image)
    overwrite_tensor(text, "text_model.encoder.layers.0.mlp.fc1.weight")
    vision = next(n for n in safetensors_header(image / "model.safetensors")[0] if "vision" in n)
    overwrite_tensor(image, vision)
    assert from_checkpoint(text) != base
    assert from_checkpoint(image) == base


def test_revision_and_a_changed_tokenizer_change_it(checkpoint: Path, tmp_path: Path) -> None:
    base = from_checkpoint(checkpoint)
    assert checkpoint_fingerprint(checkpoint, repository=REPOSITORY, revision="f" * 40) != base
    other = tmp_path / "tokenizer"
    shutil.copytree(checkpoint, other)
    data = json.loads((other / "tokenizer.json").read_text("utf-8"))
    data["added_tokens"][3]["content"] = "<unknown>"
    (other / "tokenizer.json").write_text(json.dumps(data), "utf-8")
    assert from_checkpoint(other) != base


def test_an_export_without_lowercasing_records_another_fingerprint(
    checkpoint: Path, bundles: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "no-lowercase"
    assert export_tiny(checkpoint, out, "--lowercase", "none") == 0
    recorded = manifest(out)["fingerprint"]
    assert recorded == from_checkpoint(checkpoint, lowercase="none")
    assert recorded != manifest(bundles["fp32"])["fingerprint"]
    assert manifest(out)["contract"]["lowercase"] == "none"
    assert load(out).fingerprint == recorded  # declared, so served


def test_init_refuses_an_exported_bundle_whose_fingerprint_was_edited(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    bundle = tmp_path / "edited"
    shutil.copytree(bundles["int8"], bundle)
    data = manifest(bundle)
    data["fingerprint"] = "sha256:" + "ab" * 32
    (bundle / "manifest.json").write_text(json.dumps(data, indent=2))
    with pytest.raises(ModelLoadError, match="is not the digest of its contract record"):
        load(bundle)


def test_init_refuses_the_fp32_tokenizer_swapped_for_one_without_lowercasing(
    bundles: dict[str, Path], checkpoint: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "swapped"
    shutil.copytree(bundles["fp32"], bundle)
    shutil.copyfile(checkpoint / "tokenizer.json", bundle / "tokenizer.json")
    data = manifest(bundle)
    del data["files"]  # as if made by hand: the behaviour is checked, not only the bytes
    (bundle / "manifest.json").write_text(json.dumps(data, indent=2))
    with pytest.raises(ModelLoadError, match="declares lowercase 'unicode'.*does 'none'"):
        load(bundle)


@contextmanager
def serving_bundle(bundle: Path) -> Iterator[str]:
    """`siglip-text serve --model-dir BUNDLE` on a free loopback port; its base URL."""
    with serving(["--model-dir", str(bundle)]) as server:
        yield server.base


def test_the_rollout_check_compares_an_endpoint_with_the_checkpoint(
    checkpoint: Path, bundles: dict[str, Path], live_server: str, capsys: Any
) -> None:
    argv = ["fingerprint", str(checkpoint), "--repository", REPOSITORY, "--revision", REVISION]
    with serving_bundle(bundles["int8"]) as base:
        assert main([*argv, "--url", f"{base}/v1"]) == 0
    capsys.readouterr()
    # the demo endpoint serves another contract: exit 1, both values named
    assert main([*argv, "--url", live_server]) == 1
    error = capsys.readouterr().err
    assert from_checkpoint(checkpoint) in error
    assert httpx.get(f"{live_server}/health").json()["fingerprint"] in error
