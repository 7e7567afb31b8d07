"""The contract fingerprint and ``POST /tokenize`` with the real 256k Gemma tokenizer.

A tiny-width SigLIP 2 tower with the real vocabulary (devkit/gemma.py), in both
checkpoint shapes a user meets (the Hub's ``<bos>`` post-processor; ``$A <eos>``): their
fingerprints are equal, since the server applies the contract's own BOS/EOS rule whatever
the post-processor says; the exported bundle (its tokenizer pruned) records the checkpoint's
value and reports it; ``/tokenize`` gives SigLIP 2's ids on every edge-case text. Skips when
``SIGLIP_GEMMA_TOKENIZER_DIR`` is unset.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

for _module in ("torch", "transformers", "onnx"):
    pytest.importorskip(
        _module,
        reason="needs the export extra: pip install torch==2.13.0 -e '.[export]'",
    )

from fastapi.testclient import TestClient  # noqa: E402
from siglip_text.http.app import create_app  # noqa: E402
from siglip_text.settings import load_service, load_settings  # noqa: E402
from siglip_text.tools.checkpoint_fingerprint import checkpoint_fingerprint  # noqa: E402
from siglip_text.tools.export.pipeline import ExportOptions, export_bundle  # noqa: E402

from devkit import gemma  # noqa: E402
from devkit.edge_texts import edge_texts  # noqa: E402

pytestmark = [pytest.mark.export, pytest.mark.gemma, pytest.mark.slow]

TEXTS = edge_texts()


@pytest.fixture(scope="module")
def source() -> Path:
    return gemma.tokenizer_dir_or_skip()


@pytest.fixture(scope="module")
def checkpoints(source: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return gemma.checkpoints(source, tmp_path_factory.mktemp("gemma-fingerprint"))


@pytest.fixture(scope="module")
def bundle(checkpoints: dict[str, Path]) -> Path:
    options = ExportOptions(
        source=str(checkpoints["bos"]),
        out=checkpoints["bos"].parent / "bundle",
        repository=gemma.REPOSITORY,
        revision=gemma.REVISION,
        threads=1,
    )
    return export_bundle(options).out


def fingerprint_of(checkpoint: Path) -> str:
    return checkpoint_fingerprint(checkpoint, repository=gemma.REPOSITORY, revision=gemma.REVISION)


def test_both_checkpoint_shapes_have_one_fingerprint(checkpoints: dict[str, Path]) -> None:
    values = {shape: fingerprint_of(path) for shape, path in checkpoints.items()}
    assert values["bos"] == values["eos"]


def test_the_pruned_bundle_records_and_reports_the_checkpoints_fingerprint(
    checkpoints: dict[str, Path], bundle: Path
) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["tokenizer_merges"]["after"] < manifest["tokenizer_merges"]["before"]
    expected = fingerprint_of(checkpoints["bos"])
    assert manifest["fingerprint"] == expected
    assert load_service(load_settings(model_dir=bundle, ort_intra_op_threads=1)).fingerprint == (
        expected
    )


def test_tokenize_gives_siglip2s_ids_on_every_edge_case(source: Path, bundle: Path) -> None:
    expected = gemma.reference_ids(gemma.reference_tokenizer(source), TEXTS)
    settings = load_settings(model_dir=bundle, ort_intra_op_threads=1)
    with TestClient(create_app(load_service(settings), settings)) as client:
        rows = client.post("/tokenize", json={"inputs": TEXTS}).json()
    assert len(rows) == len(TEXTS)
    for text, row, ids in zip(TEXTS, rows, expected, strict=True):
        got = [t["id"] for t in row]
        assert got + [0] * (64 - len(got)) == ids, text
        for token in row[:-1]:
            assert token["text"] == text[token["start"] : token["stop"]]
