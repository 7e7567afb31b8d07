"""The production dashboard draws only metrics that exist: each one the function emits (its
name, namespace and dimensions as the code and Powertools write them) or one AWS publishes
for the stack's function and API (their names and dimensions in AWS's documentation).

The dashboard is the SAM translator's output (devkit/sam.py) under samconfig.toml's prod
line, its body resolved as CloudFormation would, for a function whose name is FUNCTION.
The function's own metrics are read from the code: the metric names its modules pass to
Powertools (`add_metric(name=...)`), and the EMF document Powertools writes for them with
the namespace and service the template gives the function.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devkit.deployment import samconfig_parameters
from devkit.lambda_context import LambdaContext
from devkit.paths import ROOT
from devkit.sam import evaluate_conditions, parameter_defaults, resolve, source_template, translate

TOPIC = "arn:aws:sns:us-east-1:123456789012:siglip-text-alarms"
FUNCTION = "siglip-text-prod-SiglipTextFunction-AbCdEf123456"
LOG_GROUP = "siglip-text-prod-FunctionLogGroup-AbCdEf"
PACKAGE = ROOT / "handler" / "siglip_text"
#: What AWS publishes that the dashboard may draw, by namespace: metric names, and the one
#: dimension set the dashboard uses. Lambda: "Types of metrics for Lambda functions" and, for
#: function URLs, "Monitoring Lambda function URLs" (Lambda Developer Guide); API Gateway:
#: "Amazon API Gateway dimensions and metrics" (API Gateway Developer Guide).
AWS_METRICS = {
    "AWS/Lambda": (
        {
            "Invocations",
            "Errors",
            "Throttles",
            "Duration",
            "ConcurrentExecutions",
            "UrlRequestCount",
            "Url4xxCount",
            "Url5xxCount",
            "UrlRequestLatency",
        },
        {"FunctionName"},
    ),
    "AWS/ApiGateway": (
        {"Count", "4XXError", "5XXError", "Latency", "IntegrationLatency"},
        {"ApiName", "Stage"},
    ),
}
#: What the issue asks the dashboard to show, as the metric (or log field) that shows it.
REQUIRED = {
    "requests": ("AWS/Lambda", "Invocations"),
    "function errors": ("AWS/Lambda", "Errors"),
    "client errors": ("<function>", "ClientErrors"),
    "server errors": ("<function>", "ServerErrors"),
    "concurrency": ("AWS/Lambda", "ConcurrentExecutions"),
    "throttles": ("AWS/Lambda", "Throttles"),
    "truncated inputs": ("<function>", "TruncatedInputs"),
    "cache hits": ("<function>", "CacheHits"),
    "key refresh failures": ("<function>", "ApiKeyRefreshFailures"),
    "SnapStart restores": ("<function>", "SnapStartRestores"),
}


def production(frontend: str, reserved: str = "20") -> tuple[dict[str, Any], dict[str, Any]]:
    """The prod stack's dashboard body (parsed) and the served function's environment."""
    parameters = {
        **samconfig_parameters("prod"),
        "AlarmTopicArn": TOPIC,
        "Frontend": frontend,
        "ReservedConcurrency": reserved,
    }
    cfn = translate(parameters)
    conditions = evaluate_conditions(cfn, parameter_defaults(source_template(), **parameters))
    dashboard = cfn["Resources"]["Dashboard"]
    assert conditions[dashboard["Condition"]]
    refs = {"SiglipTextFunction": FUNCTION, "FunctionLogGroup": LOG_GROUP}
    body = json.loads(resolve(cfn, dashboard["Properties"]["DashboardBody"], parameters, refs))
    function = cfn["Resources"]["SiglipTextFunction"]["Properties"]
    environment = resolve(cfn, function["Environment"]["Variables"], parameters, refs)
    api_name = resolve(cfn, cfn["Resources"]["SiglipTextApi"]["Properties"]["Name"], parameters)
    stage = source_template()["Mappings"]["Settings"]["Api"]["StageName"]
    environment["<api>"] = {"ApiName": api_name, "Stage": stage}
    return body, environment


def drawn(body: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, str]]]:
    """Each metric of the dashboard's metric widgets: namespace, name, dimensions."""
    for widget in body["widgets"]:
        for metric in widget["properties"].get("metrics", []):
            fields = [item for item in metric if not isinstance(item, dict)]
            namespace, name, *pairs = fields
            yield namespace, name, dict(zip(pairs[::2], pairs[1::2], strict=True))


# --- what the function emits, read from the code ---------------------------------------------


def emitted_metric_names(package: Path = PACKAGE) -> set[str]:
    """Every metric name the runtime passes to Powertools' `add_metric(name=...)` as a
    literal (names chosen at run time are found by running the code: `emf_dimensions`)."""
    names = set()
    for module in package.rglob("*.py"):
        if "tools" in module.relative_to(package).parts:
            continue  # offline tools never run in Lambda
        for node in ast.walk(ast.parse(module.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_metric"
            ):
                for keyword in node.keywords:
                    if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                        names.add(keyword.value.value)
    return names


def cold_start_metric_is_captured() -> bool:
    """The Lambda function's handler (aws/function.py) publishes Powertools' ColdStart metric."""
    tree = ast.parse((PACKAGE / "aws" / "function.py").read_text())
    return any(
        isinstance(node, ast.keyword)
        and node.arg == "capture_cold_start_metric"
        and isinstance(node.value, ast.Constant)
        and node.value.value is True
        for node in ast.walk(tree)
    )


def emf_dimensions(
    environment: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> dict[str, tuple[str, set[frozenset[tuple[str, str]]]]]:
    """Metric name -> (namespace, dimension sets) as Powertools writes the function's metrics
    (EMF) with the template's namespace and service: the request observer's, and the cold
    start's."""
    from aws_lambda_powertools import Logger, Metrics
    from aws_lambda_powertools.metrics.provider.cold_start import reset_cold_start_flag
    from siglip_text.http.observability import PowertoolsObserver

    namespace = environment["POWERTOOLS_METRICS_NAMESPACE"]
    service = environment["POWERTOOLS_SERVICE_NAME"]
    metrics = Metrics(namespace=namespace, service=service)
    observer = PowertoolsObserver(metrics, Logger(service=service))

    # As the Lambda function's handler (aws/function.py) publishes them: on a cold start
    @metrics.log_metrics(capture_cold_start_metric=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        observer.embeddings_served(inputs=2, tokens=9, latency_ms=3.0, cache_hits=1, truncated=1)
        observer.request_failed(status=429, code="rate_limit_exceeded")
        observer.request_failed(status=500, code="server_error")
        observer.key_refresh_failed()
        return {}

    capsys.readouterr()
    reset_cold_start_flag()
    handler({}, LambdaContext(function_name=FUNCTION))
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    documents = [line for line in lines if "_aws" in line]
    found: dict[str, tuple[str, set[frozenset[tuple[str, str]]]]] = {}
    for document in documents:
        (directive,) = document["_aws"]["CloudWatchMetrics"]
        for dimension_set in directive["Dimensions"]:
            dims = frozenset((name, str(document[name])) for name in dimension_set)
            for metric in directive["Metrics"]:
                found.setdefault(metric["Name"], (directive["Namespace"], set()))[1].add(dims)
    return found


# --- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("frontend", ["rest-api", "function-url"])
def test_every_metric_the_dashboard_draws_is_one_the_function_or_aws_emits(
    frontend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    body, environment = production(frontend)
    emf = emf_dimensions(environment, capsys)
    own = set(emf) | emitted_metric_names()
    if not cold_start_metric_is_captured():
        own.discard("ColdStart")
    namespace = environment["POWERTOOLS_METRICS_NAMESPACE"]
    metrics = list(drawn(body))
    assert metrics
    for metric_namespace, name, dimensions in metrics:
        if metric_namespace == namespace:
            # the function's own: a name its code emits, with Powertools' dimensions
            assert name in own, name
            if name in emf:
                emitted_namespace, dimension_sets = emf[name]
                assert emitted_namespace == namespace
                assert frozenset(dimensions.items()) in dimension_sets, (name, dimensions)
            else:  # emitted elsewhere (SnapStart's restore hook): the service dimension
                assert dimensions == {"service": environment["POWERTOOLS_SERVICE_NAME"]}, name
        else:
            names, dimension_names = AWS_METRICS[metric_namespace]
            assert name in names, (metric_namespace, name)
            assert set(dimensions) == dimension_names, (name, dimensions)
            if metric_namespace == "AWS/Lambda":
                assert dimensions["FunctionName"] == FUNCTION
            else:
                assert frontend == "rest-api"
                assert dimensions == environment["<api>"]


@pytest.mark.parametrize("frontend", ["rest-api", "function-url"])
def test_the_dashboard_shows_what_on_call_reads_at_a_glance(frontend: str) -> None:
    body, environment = production(frontend)
    namespace = environment["POWERTOOLS_METRICS_NAMESPACE"]
    shown = {(ns, name) for ns, name, _ in drawn(body)}
    for what, (ns, name) in REQUIRED.items():
        assert (namespace if ns == "<function>" else ns, name) in shown, what
    # the frontend's requests, errors and p50/p99 latency
    stats = {
        (metric[1], item["stat"])
        for widget in body["widgets"]
        for metric in widget["properties"].get("metrics", [])
        for item in metric
        if isinstance(item, dict) and "stat" in item
    }
    latency = "Latency" if frontend == "rest-api" else "UrlRequestLatency"
    assert {(latency, "p50"), (latency, "p99")} <= stats
    assert {("EmbeddingLatency", "p50"), ("EmbeddingLatency", "p99")} <= stats
    # AND init (and restore) durations, from Lambda's JSON report lines in the function's group
    (logs,) = [w["properties"] for w in body["widgets"] if w["type"] == "log"]
    assert logs["query"].startswith(f"SOURCE '{LOG_GROUP}' |")
    assert 'type = "platform.report"' in logs["query"]
    assert "record.metrics.initDurationMs" in logs["query"]
    assert "record.metrics.restoreDurationMs" in logs["query"]
    # AND within CloudWatch's free dashboards' 50 metrics
    assert len(list(drawn(body))) <= 50


@pytest.mark.parametrize("reserved", ["20", "0"])
def test_the_concurrency_widget_marks_the_reservation(reserved: str) -> None:
    body, _ = production("rest-api", reserved=reserved)
    (widget,) = [
        w["properties"]
        for w in body["widgets"]
        if any(m[1] == "ConcurrentExecutions" for m in w["properties"].get("metrics", []))
    ]
    lines = widget.get("annotations", {}).get("horizontal", [])
    assert [line["value"] for line in lines] == ([int(reserved)] if reserved != "0" else [])


def test_only_production_has_a_dashboard() -> None:
    # (a dashboard costs $3 a month past an account's first three: not in the cheap default)
    parameters = samconfig_parameters("default")
    cfn = translate(parameters)
    conditions = evaluate_conditions(cfn, parameter_defaults(source_template(), **parameters))
    dashboards = [r for r in cfn["Resources"].values() if r["Type"] == "AWS::CloudWatch::Dashboard"]
    assert dashboards
    assert not any(conditions[r["Condition"]] for r in dashboards)
