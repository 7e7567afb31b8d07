"""Request observers for the two runtimes. Neither ever sees query text."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Metrics


class LoggingObserver:
    """For `siglip-text serve`: one debug line per request, warnings for server errors."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or logging.getLogger("siglip_text.requests")

    def embeddings_served(
        self, *, inputs: int, tokens: int, latency_ms: float, cache_hits: int, truncated: int = 0
    ) -> None:
        self.logger.debug(
            "embedded inputs=%d tokens=%d latency_ms=%.2f cache_hits=%d truncated=%d",
            inputs,
            tokens,
            latency_ms,
            cache_hits,
            truncated,
        )

    def request_failed(self, *, status: int, code: str | None) -> None:
        level = logging.WARNING if status >= 500 else logging.DEBUG
        self.logger.log(level, "request failed status=%d code=%s", status, code)

    def key_refresh_failed(self) -> None:
        """auth.py has logged the failed read of the key secret (cause and next attempt)."""


class PowertoolsObserver:
    """For Lambda: EMF metrics through Powertools Metrics, structured logs through Logger."""

    def __init__(self, metrics: Metrics, logger: Logger) -> None:
        self.metrics = metrics
        self.logger = logger

    def embeddings_served(
        self, *, inputs: int, tokens: int, latency_ms: float, cache_hits: int, truncated: int = 0
    ) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        self.metrics.add_metric(
            name="EmbeddingLatency", unit=MetricUnit.Milliseconds, value=latency_ms
        )
        self.metrics.add_metric(name="Inputs", unit=MetricUnit.Count, value=inputs)
        self.metrics.add_metric(name="Tokens", unit=MetricUnit.Count, value=tokens)
        if cache_hits:
            self.metrics.add_metric(name="CacheHits", unit=MetricUnit.Count, value=cache_hits)
        if truncated:
            # How many inputs were cut to the model's length: a count, never the text.
            self.metrics.add_metric(name="TruncatedInputs", unit=MetricUnit.Count, value=truncated)
        self.logger.debug(
            "embedded",
            extra={"inputs": inputs, "tokens": tokens, "latency_ms": round(latency_ms, 3)},
        )

    def request_failed(self, *, status: int, code: str | None) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        name = "ServerErrors" if status >= 500 else "ClientErrors"
        self.metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)
        if status == 429:
            self.metrics.add_metric(name="Throttled", unit=MetricUnit.Count, value=1)
        log = self.logger.warning if status >= 500 else self.logger.info
        log("request failed", extra={"status": status, "code": code})

    def key_refresh_failed(self) -> None:
        """One failed read of the API key secret (auth.py logs its cause): an EMF metric to
        alarm on, flushed with the invocation's other metrics."""
        from aws_lambda_powertools.metrics import MetricUnit

        self.metrics.add_metric(name="ApiKeyRefreshFailures", unit=MetricUnit.Count, value=1)
