"""docs/deploy-observability.md's Logs Insights queries read fields the log lines carry.

The function's lines are made by its own code: the request observer (http/observability.py)
with Powertools' Logger and Metrics, as lambda_function.py builds them, writing to stdout as
Lambda would collect it. Lambda's report lines carry the fields of the Telemetry API's
`platform.report` schema, which Lambda's JSON log format uses for its system lines
("Configuring JSON and plain text log formats", "Lambda Telemetry API Event schema
reference", Lambda Developer Guide). The access log's fields are the keys of the template's
AccessLogSetting format.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from devkit.deployment import load_template
from devkit.readme import snippet

#: Fields Logs Insights gives every event.
BUILT_IN = {"@timestamp", "@logStream", "@message", "@log"}
#: The query language's words and functions the queries use (not fields).
WORDS = {
    "fields",
    "filter",
    "sort",
    "desc",
    "asc",
    "limit",
    "stats",
    "by",
    "as",
    "and",
    "or",
    "not",
    "count",
    "ispresent",
    "bin",
    "pct",
}
#: A `platform.report` line in JSON format (the schema's fields the queries may read).
PLATFORM_REPORT = {
    "time": "2026-12-06T02:00:00.000Z",
    "type": "platform.report",
    "record": {
        "requestId": "52fdfc07-2182-154f-163f-5f0f9a621d72",
        "metrics": {
            "durationMs": 81.2,
            "billedDurationMs": 82,
            "memorySizeMB": 3538,
            "maxMemoryUsedMB": 612,
            "initDurationMs": 2011.5,
        },
        "status": "success",
    },
}


def fields_read(query: str) -> set[str]:
    """The fields a query reads: its identifiers, less the language's words, string and
    number literals, and the names it defines with `as`."""
    text = re.sub(r'"[^"]*"', " ", query)
    defined = set(re.findall(r"\bas\s+([A-Za-z_]\w*)", text))
    names = set(re.findall(r"[@A-Za-z_][\w.@]*", text))
    return {n for n in names if n not in WORDS and n not in defined}


def flattened(line: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """A JSON line's fields as Logs Insights names them (nested keys joined by dots)."""
    for key, value in line.items():
        yield prefix + key
        if isinstance(value, dict):
            yield from flattened(value, f"{prefix}{key}.")


@pytest.fixture(scope="module")
def function_lines() -> list[dict[str, Any]]:
    """What the function writes for a served request and a refused one."""
    import io
    from contextlib import redirect_stdout

    from aws_lambda_powertools import Logger, Metrics
    from siglip_text.http.observability import PowertoolsObserver

    out = io.StringIO()
    with redirect_stdout(out):
        # a logger of its own: Powertools keeps the first handler a service's logger got
        logger = Logger(service=f"siglip-text-{uuid.uuid4().hex}", stream=out)
        logger.set_correlation_id("52fdfc07-2182-154f-163f-5f0f9a621d72")
        metrics = Metrics(namespace="SiglipText", service="siglip-text")
        observer = PowertoolsObserver(metrics, logger)
        observer.embeddings_served(inputs=3, tokens=17, latency_ms=41.0, cache_hits=0)
        metrics.flush_metrics()
        observer.request_failed(status=400, code="invalid_request_error")
        metrics.flush_metrics()
    return [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


def access_log_fields() -> set[str]:
    stage = load_template()["Resources"]["SiglipTextApi"]["Properties"]["AccessLogSetting"]
    (setting, _) = stage["Fn::If"][1:]
    return set(json.loads(setting["Format"]))


def test_the_slowest_queries_read_the_metric_line_of_a_request(
    function_lines: list[dict[str, Any]],
) -> None:
    query = snippet("logs-slowest-queries").code
    (emf,) = [line for line in function_lines if "_aws" in line and "Inputs" in line]
    assert fields_read(query) <= set(flattened(emf)) | BUILT_IN
    assert "EmbeddingLatency" in fields_read(query)


def test_the_slowest_invocations_read_lambdas_report_lines() -> None:
    query = snippet("logs-slowest-invocations").code
    assert '"platform.report"' in query
    assert fields_read(query) <= set(flattened(PLATFORM_REPORT)) | BUILT_IN


def test_refused_requests_read_the_functions_request_failed_lines(
    function_lines: list[dict[str, Any]],
) -> None:
    query = snippet("logs-refused-requests").code
    (refused,) = [line for line in function_lines if line.get("message") == "request failed"]
    assert f'message = "{refused["message"]}"' in query
    assert fields_read(query) <= set(flattened(refused)) | BUILT_IN


def test_gateway_refusals_read_the_access_logs_fields() -> None:
    query = snippet("logs-gateway-refusals").code
    assert fields_read(query) <= access_log_fields() | BUILT_IN
