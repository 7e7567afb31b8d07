"""The real 256k Gemma tokenizer through `siglip-text export` and the served path.

A tiny-width ``Siglip2TextModel`` with the real vocabulary is exported (the production
export) with the real Gemma tokenizer, in the checkpoint shapes a user meets (see
devkit/gemma.py). The bundle's ids must equal SigLIP 2's tokenizer as transformers
documents it (``GemmaTokenizerFast(add_bos_token=False, add_eos_token=True)`` on lowercased
text, ``padding="max_length"``, ``max_length=64``, truncation), with special-token strings
taken as text, on every edge-case text. Skips when ``SIGLIP_GEMMA_TOKENIZER_DIR`` is unset.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.settings import load_service, load_settings
from siglip_text.tools.export.pipeline import ExportOptions, export_bundle

from devkit import gemma
from devkit.edge_texts import SPECIAL_STRINGS, edge_texts

pytestmark = [pytest.mark.export, pytest.mark.gemma, pytest.mark.slow]

TEXTS = edge_texts()
EXPORTED_SHAPES = gemma.SHAPES


@pytest.fixture(scope="module")
def source() -> Path:
    return gemma.tokenizer_dir_or_skip()


@pytest.fixture(scope="module")
def expected_ids(source: Path) -> list[list[int]]:
    return gemma.reference_ids(gemma.reference_tokenizer(source), TEXTS)


@pytest.fixture(scope="module")
def checkpoints(source: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A checkpoint directory per shape (one tower, written once)."""
    return gemma.checkpoints(source, tmp_path_factory.mktemp("gemma-checkpoints"))


@pytest.fixture(scope="module")
def bundles(
    checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Each checkpoint shape exported by the production export."""
    base = tmp_path_factory.mktemp("gemma-bundles")
    out: dict[str, Path] = {}
    for shape, checkpoint in checkpoints.items():
        options = ExportOptions(
            source=str(checkpoint),
            out=base / shape,
            repository=gemma.REPOSITORY,
            revision=gemma.REVISION,
            threads=1,
        )
        out[shape] = export_bundle(options).out
    return out


@pytest.fixture(scope="module")
def loaded(checkpoints: dict[str, Path]) -> dict[str, Any]:
    """Each checkpoint as the installed transformers loads it (tower and tokenizer)."""
    from siglip_text.tools.export.checkpoint import SourceSpec, load_checkpoint

    return {
        shape: load_checkpoint(SourceSpec(str(path), "local", gemma.REVISION))
        for shape, path in checkpoints.items()
    }


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
    settings = load_settings(
        model_dir=None, max_inputs_per_request=len(TEXTS), token_id_inputs="accept"
    )
    with TestClient(create_app(service, settings)) as client:
        by_text = _vectors(client.post("/v1/embeddings", json={"input": TEXTS}))
        by_ids = _vectors(client.post("/v1/embeddings", json={"input": expected_ids}))
    np.testing.assert_allclose(by_text, by_ids, atol=1e-6)


def _vectors(response: Any) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.array([item["embedding"] for item in response.json()["data"]], dtype=np.float32)


def test_both_checkpoint_shapes_export_to_bundles_with_identical_ids_and_vectors(
    services: dict[str, EmbeddingService], bundles: dict[str, Path]
) -> None:
    import hashlib

    # GIVEN Gemma's tokenizer.json (<bos> prepended) with SigLIP 2's config, and the
    # consistent '$A <eos>' variant: both exported, with the installed transformers
    ids = {shape: s.tokenizer.encode_texts(TEXTS).ids for shape, s in services.items()}
    vectors = {shape: s.embed_texts(TEXTS).vectors for shape, s in services.items()}
    np.testing.assert_array_equal(ids["bos"], ids["eos"])
    np.testing.assert_array_equal(vectors["bos"], vectors["eos"])
    # the two bundles' tokenizer.json are the same file
    digests = {
        hashlib.sha256((b / "tokenizer.json").read_bytes()).hexdigest() for b in bundles.values()
    }
    assert len(digests) == 1
    for shape, service in services.items():
        # export never adds tokens: the bundle takes the checkpoint's 256,000 ids, although
        # its file lists only the entries lowercased text can produce (tokenizer_merges.py)
        assert service.tokenizer.vocab_size == gemma.VOCAB_SIZE
        pruned = service.manifest.tokenizer_merges
        assert pruned is not None and pruned.token_ids == gemma.VOCAB_SIZE
        assert pruned.entries_after is not None and pruned.entries_after < gemma.VOCAB_SIZE
        file = json.loads((bundles[shape] / "tokenizer.json").read_text(encoding="utf-8"))
        assert len(file["model"]["vocab"]) == pruned.entries_after
        # AND every id stays servable as a token-id input, the removed ones included
        removed = max(set(range(gemma.VOCAB_SIZE)) - set(file["model"]["vocab"].values()))
        vector = service.embed_token_ids([[removed, 1]]).vectors
        assert np.isfinite(vector).all()


def test_export_records_what_the_installed_transformers_makes_of_each_shape(
    loaded: dict[str, Any], bundles: dict[str, Path]
) -> None:
    import transformers

    for shape, checkpoint in loaded.items():
        # what this transformers does when a pipeline calls the tokenizer directly
        direct = checkpoint.tokenizer("a photo of a cat")["input_ids"]
        record = json.loads((bundles[shape] / "manifest.json").read_text())["checkpoint_tokenizer"]
        assert record["transformers"] == transformers.__version__
        if direct[0] == 2 and 1 not in direct:  # transformers >= 5 on the contradictory shape
            assert shape == "bos"
            assert record["note"].startswith(
                f"transformers {transformers.__version__} loads this tokenizer with a leading "
                "<bos> and no <eos>: a GPU pipeline that calls it directly does not follow"
            )
        else:  # transformers 4 rebuilds the post-processor from the config: the contract
            assert direct[-1] == 1 and 2 not in direct
            assert record.get("note") is None


def test_contract_reference_is_siglip2s_tokenizer_whatever_transformers_loads(
    loaded: dict[str, Any], expected_ids: list[list[int]]
) -> None:
    from siglip_text.tools.export.checkpoint import contract_token_ids

    # the one definition of the reference, from each checkpoint as transformers loads it
    for checkpoint in loaded.values():
        ids = contract_token_ids(checkpoint.tokenizer, TEXTS, lowercase="unicode", max_length=64)
        assert ids == expected_ids


def test_verify_names_a_pipeline_reference_of_the_contradictory_checkpoint(
    loaded: dict[str, Any], bundles: dict[str, Path], services: dict[str, EmbeddingService]
) -> None:
    from siglip_text.engine.bundle import BundlePaths
    from siglip_text.tools.backends import LocalEmbedder
    from siglip_text.tools.reference import make_reference
    from siglip_text.tools.verify.checks import load_references, verify

    from devkit.references import pipeline_reference

    texts = TEXTS[:40]
    checkpoint = loaded["bos"]
    bundle = bundles["bos"]
    embedder = LocalEmbedder(services["bos"], paths=BundlePaths.in_dir(bundle))

    def tokenizer_check(records: list[dict[str, Any]], tmp: Path) -> Any:
        from siglip_text.tools.files import write_jsonl

        write_jsonl(tmp, records)
        checks = verify(embedder, load_references([tmp]))
        return next(c for c in checks if c.name == "tokenizer")

    base = bundle.parent
    # the records `siglip-text reference` writes: the contract's ids
    contract = make_reference(checkpoint.tower, checkpoint.tokenizer, texts, lowercase="unicode")
    assert tokenizer_check(contract, base / "contract.jsonl").passed
    # a GPU pipeline that calls the same tokenizer directly, with this transformers
    pipeline = pipeline_reference(checkpoint.tower, checkpoint.tokenizer, texts)
    check = tokenizer_check(pipeline, base / "pipeline.jsonl")
    if checkpoint.tokenizer("a")["input_ids"][0] == 2:  # transformers >= 5
        assert not check.passed
        assert check.cause.startswith(f"likely cause: {len(texts)} of {len(texts)} reference rows")
        assert "transformers >= 5" in check.cause
        assert "The export recorded: transformers" in check.cause
    else:
        assert check.passed, check.details
