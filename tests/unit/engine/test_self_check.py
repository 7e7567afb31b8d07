"""Init's check of this CPU's arithmetic (engine/self_check.py): the probe's vector against
the reference the manifest records, and the int8 kernel's known answer, on the demo bundle."""

from __future__ import annotations

import numpy as np
import pytest
from siglip_text.engine.bundle import Manifest, SelfCheck
from siglip_text.engine.errors import ModelLoadError
from siglip_text.engine.self_check import (
    MARGIN,
    check_int8_kernel,
    check_reference,
    cosine_to_reference,
)
from siglip_text.engine.service import PROBE_TEXT, EmbeddingService


def test_the_cosine_of_a_unit_vector_to_a_reference_of_any_length() -> None:
    vector = np.array([0.6, 0.8])

    assert cosine_to_reference(vector, np.array([6.0, 8.0])) == pytest.approx(1.0)
    assert cosine_to_reference(vector, np.array([0.8, -0.6])) == pytest.approx(0.0)


def recording(service: EmbeddingService, reference: np.ndarray) -> Manifest:
    """The demo manifest with a self-check record of the probe text, as export writes one."""
    record = SelfCheck(
        text=PROBE_TEXT,
        reference=reference.astype(float).tolist(),
        min_cosine=1.0 - MARGIN,
        measured_cosine=1.0,
        measured_on="the exporting CPU",
    )
    return service.manifest.model_copy(update={"self_check": record})


def test_a_probe_vector_at_its_recorded_reference_passes(service: EmbeddingService) -> None:
    vector = service.probe()

    cosine = check_reference(recording(service, vector), PROBE_TEXT, vector)

    assert cosine == pytest.approx(1.0)


def test_a_probe_vector_far_from_its_reference_fails_closed_naming_the_bound(
    service: EmbeddingService,
) -> None:
    # GIVEN a reference recorded the other way round from this CPU's probe vector
    vector = service.probe()
    manifest = recording(service, -vector)

    # WHEN checked, THEN init is refused with the cosine, the bound and export's figure
    with pytest.raises(ModelLoadError) as refused:
        check_reference(manifest, PROBE_TEXT, vector)
    message = refused.value.message
    assert "cosine -1.000000" in message
    assert f"bound {1.0 - MARGIN}" in message
    assert "export measured 1.000000 on the exporting CPU" in message


def test_a_bundle_without_a_record_for_the_text_is_not_checked(
    service: EmbeddingService,
) -> None:
    assert service.manifest.self_check is None

    assert check_reference(service.manifest, PROBE_TEXT, service.probe()) is None


def test_an_fp32_bundle_needs_no_int8_kernel_check(service: EmbeddingService) -> None:
    manifest: Manifest = service.manifest
    assert manifest.precision != "int8"

    check_int8_kernel(manifest)  # returns without running the kernel check
