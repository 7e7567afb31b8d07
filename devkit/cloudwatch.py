"""CloudWatch alarms of a translated template, evaluated against metrics a deploy publishes.

`Metrics` records what Lambda, API Gateway and the function publish for the requests of a
scenario, each value in the minute it happened: Lambda's Invocations, Errors, Throttles and
Duration under the dimension sets it uses for an invocation through an alias ({FunctionName},
{FunctionName, Resource} and, naming the version that ran, {FunctionName, Resource,
ExecutedVersion}: "Working with Lambda function metrics", Lambda Developer Guide), its
ConcurrentExecutions and a function URL's UrlRequestCount, Url4xxCount, Url5xxCount and
UrlRequestLatency per {FunctionName}; API Gateway's Count, 4XXError, 5XXError and Latency per
{ApiName, Stage}; the stack's access-log metric of failed invokes; and the function's own
ApiKeyRefreshFailures (namespace and service dimension as the template sets them).

`alarm_states` then evaluates an alarm as CloudWatch does: each period's value (a metric's
statistic over the period's values, or a metric-math expression over several), compared with
the threshold, and ALARM once `DatapointsToAlarm` of the last `EvaluationPeriods` breach;
missing data as `TreatMissingData` says ("Using Amazon CloudWatch alarms", "Configuring how
CloudWatch alarms treat missing data", CloudWatch User Guide; "Using metric math": IF and the
comparison operators).

Only what the project's templates use is supported (Sum, SampleCount, Average, Minimum,
Maximum and pNN over whole minutes, the four threshold comparisons, +, -, *, /, the
comparison operators, FILL and IF in expressions); anything else raises.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: A metric's identity: namespace, name, and its dimensions (name, value), sorted.
MetricKey = tuple[str, str, tuple[tuple[str, str], ...]]

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanThreshold": operator.gt,
    "GreaterThanOrEqualToThreshold": operator.ge,
    "LessThanThreshold": operator.lt,
    "LessThanOrEqualToThreshold": operator.le,
}
_ARITHMETIC: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_RELATION: dict[type, Callable[[float, float], bool]] = {
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def metric_key(namespace: str, name: str, dimensions: dict[str, str]) -> MetricKey:
    return namespace, name, tuple(sorted(dimensions.items()))


@dataclass
class Metrics:
    """The values (one per event, in the minute it happened) a scenario's requests publish."""

    function: str
    alias: str = "live"
    api_name: str = "siglip-text-api"
    stage: str = "prod"
    stack: str = "siglip-text"
    namespace: str = "SiglipText"
    service: str = "siglip-text"
    values: dict[MetricKey, dict[int, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )

    def _add(
        self, namespace: str, name: str, dimensions: dict[str, str], minute: int, value: float
    ) -> None:
        self.values[metric_key(namespace, name, dimensions)][minute].append(value)

    def _lambda(self, name: str, minute: int, version: str | None, value: float = 1.0) -> None:
        resource = f"{self.function}:{self.alias}"
        sets = [
            {"FunctionName": self.function},
            {"FunctionName": self.function, "Resource": resource},
        ]
        if version is not None:
            sets.append({**sets[1], "ExecutedVersion": version})
        for dimensions in sets:
            self._add("AWS/Lambda", name, dimensions, minute, value)

    def invoke(
        self,
        minute: int,
        version: str,
        *,
        error: bool = False,
        duration_ms: float = 50.0,
        latency_ms: float | None = None,
    ) -> None:
        """One invocation of `version` through the alias; `error`: it failed (a crash, a
        timeout, a failed init), which the frontend answers with a 5xx. Lambda publishes
        Errors with every invocation, 0 when it succeeded; the frontend's latency is the
        invocation's duration plus a few milliseconds unless given."""
        self._lambda("Invocations", minute, version)
        self._lambda("Errors", minute, version, 1.0 if error else 0.0)
        self._lambda("Duration", minute, version, duration_ms)
        latency = duration_ms + 10.0 if latency_ms is None else latency_ms
        self.request(minute, status=502 if error else 200, latency_ms=latency)

    def throttle(self, minute: int) -> None:
        """One request refused at the function's concurrency limit: Lambda's Throttles, and
        the gateway's failed invoke (a 503 through INTEGRATION_FAILURE; a function URL's
        429)."""
        self._lambda("Throttles", minute, None)
        self._gateway(minute, status=503, latency_ms=20.0)
        self._url(minute, status=429, latency_ms=20.0)
        self._add(self.namespace, f"{self.stack}-GatewayInvokeFailures", {}, minute, 1.0)

    def request(self, minute: int, *, status: int, latency_ms: float) -> None:
        """One answer of the frontend, as API Gateway and a function URL count it."""
        self._gateway(minute, status=status, latency_ms=latency_ms)
        self._url(minute, status=status, latency_ms=latency_ms)

    def _gateway(self, minute: int, *, status: int, latency_ms: float) -> None:
        dimensions = {"ApiName": self.api_name, "Stage": self.stage}
        self._add("AWS/ApiGateway", "Count", dimensions, minute, 1.0)
        self._add("AWS/ApiGateway", "Latency", dimensions, minute, latency_ms)
        self._add("AWS/ApiGateway", "4XXError", dimensions, minute, float(400 <= status < 500))
        self._add("AWS/ApiGateway", "5XXError", dimensions, minute, float(status >= 500))

    def _url(self, minute: int, *, status: int, latency_ms: float) -> None:
        dimensions = {"FunctionName": self.function}
        self._add("AWS/Lambda", "UrlRequestCount", dimensions, minute, 1.0)
        self._add("AWS/Lambda", "UrlRequestLatency", dimensions, minute, latency_ms)
        self._add("AWS/Lambda", "Url4xxCount", dimensions, minute, float(400 <= status < 500))
        self._add("AWS/Lambda", "Url5xxCount", dimensions, minute, float(status >= 500))

    def gateway_5xx(self, minute: int) -> None:
        dimensions = {"ApiName": self.api_name, "Stage": self.stage}
        self._add("AWS/ApiGateway", "5XXError", dimensions, minute, 1.0)

    def concurrency(self, minute: int, executions: int) -> None:
        """Lambda's ConcurrentExecutions of the function, sampled once in `minute`."""
        self._add(
            "AWS/Lambda",
            "ConcurrentExecutions",
            {"FunctionName": self.function},
            minute,
            float(executions),
        )

    def key_refresh_failed(self, minute: int) -> None:
        """One failed read of the key secret (the function's EMF metric)."""
        dimensions = {"service": self.service}
        self._add(self.namespace, "ApiKeyRefreshFailures", dimensions, minute, 1.0)

    def minute_values(self, key: MetricKey) -> dict[int, list[float]]:
        return {minute: list(v) for minute, v in self.values.get(key, {}).items()}


def _statistic(stat: str, values: list[float]) -> float:
    if stat == "Sum":
        return sum(values)
    if stat == "SampleCount":
        return float(len(values))
    if stat == "Average":
        return sum(values) / len(values)
    if stat == "Maximum":
        return max(values)
    if stat == "Minimum":
        return min(values)
    percentile = re.fullmatch(r"p(\d+(?:\.\d+)?)", stat)
    if percentile:
        ranked = sorted(values)
        rank = math.ceil(float(percentile.group(1)) / 100 * len(ranked))
        return ranked[max(rank, 1) - 1]
    raise ValueError(f"statistic {stat} is not modelled")


def _minutes_per_period(period: Any) -> int:
    seconds = int(period)
    if seconds % 60:
        raise ValueError(f"only whole minutes are modelled: {seconds} s")
    return seconds // 60


def _stat_series(stat: dict[str, Any], metrics: Metrics) -> dict[int, float]:
    """The statistic of each period (by its index: period k holds minutes k*p .. k*p+p-1)."""
    metric = stat["Metric"]
    per = _minutes_per_period(stat.get("Period", 60))
    dimensions = {d["Name"]: str(d["Value"]) for d in metric.get("Dimensions", [])}
    by_minute = metrics.minute_values(
        metric_key(metric["Namespace"], metric["MetricName"], dimensions)
    )
    by_period: dict[int, list[float]] = defaultdict(list)
    for minute, values in by_minute.items():
        by_period[minute // per].extend(values)
    return {
        k: _statistic(stat.get("Stat", "Sum"), values) for k, values in by_period.items() if values
    }


def _expression(text: str, inputs: dict[str, dict[int, float]], periods: range) -> dict[int, float]:
    """A metric-math expression, period by period: a period missing in an operand is missing
    in the result, unless FILL supplies it."""

    def value(node: ast.expr, k: int) -> float | None:  # noqa: PLR0911
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.Name):
            return inputs[node.id].get(k)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "FILL" and len(node.args) == 2:
                found = value(node.args[0], k)
                return found if found is not None else value(node.args[1], k)
            if node.func.id == "IF" and len(node.args) == 3:
                condition = value(node.args[0], k)
                if condition is None:
                    return None
                return value(node.args[1] if condition else node.args[2], k)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _RELATION:
            left, right = value(node.left, k), value(node.comparators[0], k)
            if left is None or right is None:
                return None
            return float(_RELATION[type(node.ops[0])](left, right))
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            left, right = value(node.left, k), value(node.right, k)
            if left is None or right is None or (isinstance(node.op, ast.Div) and right == 0):
                return None
            return _ARITHMETIC[type(node.op)](left, right)
        raise ValueError(f"metric math not modelled: {ast.dump(node)}")

    tree = ast.parse(text, mode="eval").body
    results = {k: value(tree, k) for k in periods}
    return {k: v for k, v in results.items() if v is not None}


def _alarm_period(alarm: dict[str, Any]) -> int:
    """Minutes per period of an alarm (every query of a metric-math alarm shares it)."""
    if "Metrics" not in alarm:
        return _minutes_per_period(alarm["Period"])
    found = {
        _minutes_per_period(query["MetricStat"].get("Period", 60))
        for query in alarm["Metrics"]
        if "MetricStat" in query
    }
    if len(found) != 1:
        raise ValueError(f"queries of different periods: {found}")
    return found.pop()


def alarm_series(alarm: dict[str, Any], metrics: Metrics, periods: range) -> dict[int, float]:
    """The values an alarm compares with its threshold, by period index (missing: no data)."""
    if "Metrics" not in alarm:
        if "ExtendedStatistic" in alarm:
            statistic = alarm["ExtendedStatistic"]
        else:
            statistic = alarm["Statistic"]
        stat = {
            "Metric": {
                k: alarm[k] for k in ("Namespace", "MetricName", "Dimensions") if k in alarm
            },
            "Stat": statistic,
            "Period": alarm["Period"],
        }
        return {k: v for k, v in _stat_series(stat, metrics).items() if k in periods}
    inputs: dict[str, dict[int, float]] = {}
    returned: list[dict[str, Any]] = []
    for query in alarm["Metrics"]:
        if "MetricStat" in query:
            inputs[query["Id"]] = _stat_series(query["MetricStat"], metrics)
        else:
            inputs[query["Id"]] = _expression(query["Expression"], inputs, periods)
        if query.get("ReturnData", True):
            returned.append(query)
    (result,) = returned
    return {k: v for k, v in inputs[result["Id"]].items() if k in periods}


def alarm_states(alarm: dict[str, Any], metrics: Metrics, minutes: range) -> list[str]:
    """The alarm's state at the end of each minute (ALARM or OK), from the periods complete
    by then."""
    per = _alarm_period(alarm)
    periods = range(0, (minutes.stop + per - 1) // per + 1)
    series = alarm_series(alarm, metrics, periods)
    compare = _COMPARE[alarm["ComparisonOperator"]]
    threshold = float(alarm["Threshold"])
    evaluation = int(alarm["EvaluationPeriods"])
    needed = int(alarm.get("DatapointsToAlarm", evaluation))
    missing = alarm.get("TreatMissingData", "missing")
    if missing not in ("notBreaching", "breaching"):
        raise ValueError(f"TreatMissingData {missing} is not modelled")
    states = []
    for end in minutes:
        last = (end + 1) // per - 1  # the last period complete at the end of this minute
        window = range(last - evaluation + 1, last + 1)
        breaching = sum(
            compare(series[k], threshold) if k in series else missing == "breaching" for k in window
        )
        states.append("ALARM" if breaching >= needed else "OK")
    return states
