"""The real 256k Gemma tokenizer through `siglip-text export` and the served path.

A tiny-width ``Siglip2TextModel`` with the real vocabulary is exported (the production
export) with the real Gemma tokenizer, in the checkpoint shapes a user meets (see
tests/support/gemma.py). The bundle's ids must equal SigLIP 2's tokenizer as transformers
documents it (``GemmaTokenizerFast(add_bos_token=False, add_eos_token=True)`` on lowercased
text, ``padding="max_length"``, ``max_length=64``, truncation), with special-token strings
taken as text, on every edge-case text. Skips when ``SIGLIP_GEMMA_TOKENIZER_DIR`` is unset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

for _module in ("torch", "transformers", "onnx"):
    pytest.importorskip(
        _module,
        reason="needs the export extra: pip install torch==2.13.0 -e '.[export]'",
    )

from fastapi.testclient import TestClient  # noqa: E402
from siglip_text.api import create_app  # noqa: E402
from siglip_text.config import load_settings  # noqa: E402
from siglip_text.loading import load_service  # noqa: E402
from siglip_text.service import EmbeddingService  # noqa: E402
from siglip_text.tools.export.pipeline import ExportOptions, export_bundle  # noqa: E402

from tests.support import gemma  # noqa: E402
from tests.support.edge_texts import SPECIAL_STRINGS, edge_texts  # noqa: E402

pytestmark = pytest.mark.export

TEXTS = edge_texts()
#: The shapes that export today (the contradictory one is added by the contract reference).
EXPORTED_SHAPES: tuple[gemma.Shape, ...] = ("eos",)


@pytest.fixture(scope="module")
def source() -> Path:
    found = gemma.tokenizer_dir()
    if found is None:
        pytest.skip(gemma.SKIP_REASON)
    return found


@pytest.fixture(scope="module")
def expected_ids(source: Path) -> list[list[int]]:
    return gemma.reference_ids(gemma.reference_tokenizer(source), TEXTS)


@pytest.fixture(scope="module")
def bundles(source: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each checkpoint shape exported by the production export (one tower, written once)."""
    base = tmp_path_factory.mktemp("gemma")
    gemma.write_tower(base / "tower")
    out: dict[str, Path] = {}
    for shape in EXPORTED_SHAPES:
        checkpoint = gemma.make_checkpoint(
            source, base / f"checkpoint-{shape}", shape=shape, tower=base / "tower"
        )
        options = ExportOptions(
            source=str(checkpoint),
            out=base / f"bundle-{shape}",
            repository=gemma.REPOSITORY,
            revision=gemma.REVISION,
            threads=1,
        )
        out[shape] = export_bundle(options).out
    return out


@pytest.fixture(scope="module")
def services(bundles: dict[str, Path]) -> dict[str, EmbeddingService]:
    return {
        shape: load_service(load_settings(model_dir=path, ort_intra_op_threads=1))
        for shape, path in bundles.items()
    }


def test_there_are_at_least_200_edge_case_texts() -> None:
    assert len(TEXTS) >= 200
    assert "" in TEXTS and all(tok in TEXTS for tok in SPECIAL_STRINGS)


def test_reference_takes_special_token_strings_as_text(expected_ids: list[list[int]]) -> None:
    # GIVEN SigLIP 2's tokenizer with special-token splitting: control ids only where the
    # contract puts them (one <eos>, then <pad>), never <bos>, <unk> or <mask> (ids 2, 3, 4)
    for text, ids in zip(TEXTS, expected_ids, strict=True):
        end = ids.index(1)
        assert ids[end + 1 :] == [0] * (63 - end), text
        assert {0, 1, 2, 3, 4}.isdisjoint(ids[:end]), text
    assert expected_ids[TEXTS.index("")] == [1] + [0] * 63


@pytest.mark.parametrize("shape", EXPORTED_SHAPES)
def test_bundle_ids_equal_siglip2_tokenizer_on_every_edge_case(
    services: dict[str, EmbeddingService], expected_ids: list[list[int]], shape: str
) -> None:
    ours = services[shape].tokenizer.encode_texts(TEXTS).ids.tolist()
    wrong = [
        f"{text[:40]!r}: ours {mine[:8]}..., reference {ref[:8]}..."
        for text, mine, ref in zip(TEXTS, ours, expected_ids, strict=True)
        if mine != ref
    ]
    assert not wrong, f"{len(wrong)} of {len(TEXTS)} texts differ:\n" + "\n".join(wrong[:20])
    # one at a time (the short and the long-text paths) gives the same ids as the batch
    for text, ref in zip(TEXTS[::23], expected_ids[::23], strict=True):
        assert services[shape].tokenizer.encode_texts([text]).ids[0].tolist() == ref


def test_bundle_serves_the_reference_ids_vectors_over_http(
    services: dict[str, EmbeddingService], expected_ids: list[list[int]]
) -> None:
    # GIVEN the text and the reference ids (sent as token ids), THEN the same vector
    shape = EXPORTED_SHAPES[0]
    service = services[shape]
    settings = load_settings(model_dir=None, max_inputs_per_request=len(TEXTS))
    with TestClient(create_app(service, settings)) as client:
        by_text = _vectors(client.post("/v1/embeddings", json={"input": TEXTS}))
        by_ids = _vectors(client.post("/v1/embeddings", json={"input": expected_ids}))
    np.testing.assert_allclose(by_text, by_ids, atol=1e-6)


def _vectors(response: Any) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.array([item["embedding"] for item in response.json()["data"]], dtype=np.float32)
