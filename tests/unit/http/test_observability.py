"""The request observers (http/observability.py): what `serve` logs and what Lambda counts,
through plain `logging` and Powertools' own Metrics."""

from __future__ import annotations

import logging

import pytest
from aws_lambda_powertools import Logger, Metrics
from siglip_text.http.observability import LoggingObserver, PowertoolsObserver


def test_serve_logs_server_errors_as_warnings_and_the_rest_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    observer = LoggingObserver(logging.getLogger("siglip_text.test_observability"))

    with caplog.at_level(logging.DEBUG, logger="siglip_text.test_observability"):
        observer.request_failed(status=503, code="service_unavailable")
        observer.request_failed(status=400, code="invalid_input")
        observer.embeddings_served(inputs=2, tokens=9, latency_ms=1.5, cache_hits=1, truncated=1)

    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "request failed status=503 code=service_unavailable"),
        ("DEBUG", "request failed status=400 code=invalid_input"),
        ("DEBUG", "embedded inputs=2 tokens=9 latency_ms=1.50 cache_hits=1 truncated=1"),
    ]


def test_lambda_counts_each_kind_of_answer_as_a_metric() -> None:
    metrics = Metrics(namespace="SiglipTextTest", service="observability")
    observer = PowertoolsObserver(metrics, Logger(service="observability"))

    observer.embeddings_served(inputs=2, tokens=9, latency_ms=1.5, cache_hits=0, truncated=1)
    observer.request_failed(status=429, code="rate_limit_exceeded")
    observer.request_failed(status=500, code=None)
    observer.key_refresh_failed()

    recorded = {name: dict(entry) for name, entry in metrics.metric_set.items()}
    metrics.clear_metrics()
    assert set(recorded) == {
        "EmbeddingLatency",
        "Inputs",
        "Tokens",
        "TruncatedInputs",
        "ClientErrors",
        "Throttled",
        "ServerErrors",
        "ApiKeyRefreshFailures",
    }
    assert recorded["Tokens"]["Value"] == [9.0]
