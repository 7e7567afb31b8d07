"""engine/contract.py: the contract record, its SigLIP 2 rules written once, and the
fields a manifest's record must hold."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from siglip_text.engine.contract import CONTRACT_FORMAT, Contract

DIGEST = "sha256:" + "0" * 64


def siglip2(**changes: Any) -> Contract:
    values: dict[str, Any] = {
        "repository": "google/siglip2-base-patch16-224",
        "revision": "a" * 40,
        "tokenizer": DIGEST,
        "lowercase": "unicode",
        "eos_id": 1,
        "pad_id": 0,
        "length": 64,
        "dimension": 768,
        "weights": DIGEST,
        "weights_of": "checkpoint-text-tower",
    }
    return Contract.siglip2(**{**values, **changes})


def test_siglip2_writes_the_rules_every_siglip2_vector_follows() -> None:
    contract = siglip2()
    assert contract.format == CONTRACT_FORMAT
    assert (contract.bos, contract.eos, contract.padding) == ("none", "sticky", "right")
    assert (contract.pooling, contract.head, contract.normalization) == (
        "last-position",
        "linear",
        "l2",
    )


def test_a_record_that_leaves_a_field_out_is_refused_not_completed() -> None:
    record = siglip2().model_dump()
    del record["pooling"]
    with pytest.raises(ValidationError):
        Contract.model_validate(record)


@pytest.mark.parametrize(
    "changes",
    [
        {"revision": "main"},
        {"tokenizer": "sha256:XYZ"},
        {"length": 1},
        {"dimension": 0},
        {"eos_id": -1},
    ],
)
def test_values_outside_their_form_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        siglip2(**changes)


def test_a_rule_of_another_model_is_refused_when_a_record_is_read() -> None:
    record = {**siglip2().model_dump(), "pooling": "mean"}
    with pytest.raises(ValidationError):
        Contract.model_validate(record)


def test_unknown_fields_are_kept_and_the_record_is_frozen() -> None:
    record = {**siglip2().model_dump(), "note": "from a newer export"}
    contract = Contract.model_validate(record)
    assert contract.model_dump()["note"] == "from a newer export"
    with pytest.raises(ValidationError):
        contract.dimension = 1  # type: ignore[misc]
