"""aws/snapstart.py: when an init is a SnapStart one, the warm-up's event and context, and
the probe computed now rather than read from the vector cache."""

from __future__ import annotations

import numpy as np
from siglip_text.aws.events import as_mangum_reads
from siglip_text.aws.snapstart import (
    INITIALIZATION_TYPE,
    SNAP_START,
    probe_vector,
    snap_start_init,
    warm_up_context,
    warm_up_event,
)
from siglip_text.engine.service import EmbeddingService


def test_only_lambdas_snap_start_init_type_is_a_snapstart_init() -> None:
    assert snap_start_init({INITIALIZATION_TYPE: SNAP_START}) is True
    for other in ("on-demand", "provisioned-concurrency", ""):
        assert snap_start_init({INITIALIZATION_TYPE: other}) is False
    assert snap_start_init({}) is False


def test_the_warm_up_is_a_rest_event_mangum_reads_for_the_embeddings_route() -> None:
    event = warm_up_event({"content-type": "application/json"}, '{"input": "x"}')
    assert (event["httpMethod"], event["path"]) == ("POST", "/v1/embeddings")
    assert event["body"] == '{"input": "x"}'
    assert as_mangum_reads(event) == event
    context = warm_up_context()
    assert context.get_remaining_time_in_millis() > 0


def test_the_probe_is_computed_now_not_read_from_the_vector_cache(
    service: EmbeddingService,
) -> None:
    cached = service.probe()
    computed = probe_vector(service)
    # GIVEN the same model: the same vector, but a copy of its own
    assert np.allclose(cached, computed, atol=1e-6)
    computed[:] = 0
    assert not np.array_equal(service.probe(), computed)
