"""Manifests written by earlier versions load through the typed manifest.

The fixtures are manifests exactly as each version's ``siglip-text export`` wrote them for
the tiny test checkpoint (devkit/tiny_checkpoint.py): 0.1.0 from commit d811e98,
0.3.0 from the last commit before the typed sections.
"""

from __future__ import annotations

import pytest
from siglip_text.engine.bundle import (
    CheckpointTokenizer,
    ExportCheck,
    Fidelity,
    Libraries,
    Manifest,
    Quantization,
    load_manifest,
)
from siglip_text.engine.self_check import check_int8_kernel

from devkit.paths import FIXTURES

MANIFESTS = FIXTURES / "manifests"


def test_a_0_1_0_int8_manifest_loads_with_typed_sections_and_is_not_saturation_free() -> None:
    # GIVEN an int8 manifest from 0.1.0, before the 7-bit weight form and its declaration
    manifest = load_manifest(MANIFESTS / "0.1.0-int8.json")

    # THEN its sections are typed, and what it never declared reads as not declared
    assert manifest.libraries is not None and manifest.libraries.siglip_text == "0.1.0"
    assert isinstance(manifest.export_check, ExportCheck)
    assert manifest.export_check.vs_pytorch.count == manifest.export_check.texts
    assert isinstance(manifest.quantization, Quantization)
    assert manifest.quantization.weight_form is None
    assert manifest.quantization.token_embedding is not None
    assert manifest.quantization.token_embedding.shape[1] == manifest.embedding_dimension
    assert isinstance(manifest.fidelity, Fidelity)
    assert manifest.fidelity.top10_overlap.k == 10
    assert manifest.fidelity.fp32_vs_pytorch is not None
    assert manifest.checkpoint_tokenizer is None
    assert manifest.saturation_free is False


def test_a_0_3_0_int8_manifest_declares_its_weights_saturation_free() -> None:
    manifest = load_manifest(MANIFESTS / "0.3.0-int8.json")

    assert manifest.quantization is not None
    assert manifest.quantization.weight_form == "int7"
    assert manifest.quantization.largest_pair_of_products is not None
    assert manifest.quantization.largest_pair_of_products <= 32_767
    assert manifest.saturation_free is True
    # init's kernel check reads the typed declaration: a saturation-free bundle needs no
    # exact kernel, so the check returns without refusing on any CPU
    check_int8_kernel(manifest)


@pytest.mark.parametrize("name", ["0.3.0-fp32.json", "0.3.0-int8.json"])
def test_a_0_3_0_manifest_is_written_back_byte_for_byte_by_the_typed_model(name: str) -> None:
    # GIVEN a manifest as 0.3.0 wrote it
    raw = (MANIFESTS / name).read_text()

    # WHEN it is read through the typed manifest and written as export writes it
    manifest = load_manifest(MANIFESTS / name)

    # THEN the same bytes come out: writer and reader are the same types
    assert manifest.to_json() == raw
    assert isinstance(manifest.libraries, Libraries)
    assert isinstance(manifest.checkpoint_tokenizer, CheckpointTokenizer)
    assert manifest.checkpoint_tokenizer.tokenizer_class  # written as "class"
    assert '"class":' in raw


def test_a_uint8_quantization_writes_its_absent_pair_bound_as_null() -> None:
    # GIVEN uint8 weights, which have no pair bound (U8U8 kernels widen to 16 bits)
    record = Quantization(
        method="m",
        weight_form="uint8",
        saturation_free=True,
        largest_pair_of_products=None,
        matmul_integer_nodes=1,
        qattention_nodes=0,
    )
    manifest = Manifest.model_validate(
        {
            "repository": "r",
            "revision": "a" * 40,
            "embedding_dimension": 4,
            "text_max_token_length": 64,
            "quantization": record,
        }
    )

    # THEN export writes both absent values as null, as 0.3.0 did
    text = manifest.to_json()
    assert '"largest_pair_of_products": null' in text
    assert '"token_embedding": null' in text
