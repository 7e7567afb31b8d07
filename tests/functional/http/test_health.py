"""GET /health: open to anyone, so it says that the service is up and which model it serves,
and nothing an attacker could learn from (counters, versions, threads, timings)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.settings import load_service, load_settings

from devkit.aws_lambda import built_lambda


def test_health_shows_status_model_revision_dimension_and_fingerprint_only(
    client: TestClient, service: EmbeddingService
) -> None:
    body = client.get("/health").json()
    assert body == {
        "status": "ok",
        "model": service.model_id,
        "revision": service.revision,
        "embedding_dimension": service.dimension,
        "fingerprint": service.fingerprint,
        "max_inputs_per_request": 2048,  # `serve`'s bound: nothing in front limits it
    }
    assert len(body["revision"]) == 40


def test_health_shows_no_cache_counters_even_with_a_cache(demo_dir: Path) -> None:
    settings = load_settings(model_dir=demo_dir, ort_intra_op_threads=1, cache_size=8)
    with TestClient(create_app(load_service(settings), settings)) as client:
        client.post("/v1/embeddings", json={"input": ["a cat", "a cat"]})
        body = client.get("/health").json()
    assert set(body) == {
        "status",
        "model",
        "revision",
        "embedding_dimension",
        "fingerprint",
        "max_inputs_per_request",
    }


def test_versions_threads_and_init_timings_are_in_the_init_log(demo_dir: Path, caplog: Any) -> None:
    with caplog.at_level(logging.INFO), built_lambda(demo_dir) as entry:
        assert entry.parts is not None
    loaded = next(r for r in caplog.records if r.getMessage() == "model loaded")
    assert {"onnxruntime", "tokenizers", "numpy", "python"} <= set(loaded.runtime)
    assert loaded.intra_op_threads == 1
    assert "probe_s" in loaded.init
