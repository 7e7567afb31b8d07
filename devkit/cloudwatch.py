"""CloudWatch alarms of a translated template, evaluated against metrics a deploy publishes.

`Metrics` records what Lambda and API Gateway publish for the requests of a scenario, one
datapoint per one-minute period: Lambda's Invocations, Errors and Throttles under the
dimension sets it uses for an invocation through an alias ({FunctionName},
{FunctionName, Resource} and, naming the version that ran, {FunctionName, Resource,
ExecutedVersion}: "Working with Lambda function metrics", Lambda Developer Guide), API
Gateway's 5XXError per {ApiName, Stage}, and the stack's access-log metric of failed invokes.
`alarm_states` then evaluates an alarm as CloudWatch does: each period's value (a metric's
statistic, or a metric-math expression over several), compared with the threshold, and
ALARM once `DatapointsToAlarm` of the last `EvaluationPeriods` breach; missing data as
`TreatMissingData` says ("Using Amazon CloudWatch alarms", "Configuring how CloudWatch alarms
treat missing data", CloudWatch User Guide).

Only what the project's templates use is supported (Sum over 60 s periods, the four
comparisons, +, -, *, / and FILL in expressions); anything else raises.
"""

from __future__ import annotations

import ast
import operator
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


def metric_key(namespace: str, name: str, dimensions: dict[str, str]) -> MetricKey:
    return namespace, name, tuple(sorted(dimensions.items()))


@dataclass
class Metrics:
    """The datapoints (Sum per minute) that a scenario's requests publish."""

    function: str
    alias: str = "live"
    api_name: str = "siglip-text-api"
    stage: str = "prod"
    stack: str = "siglip-text"
    sums: dict[MetricKey, dict[int, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float))
    )

    def _add(
        self, namespace: str, name: str, dimensions: dict[str, str], minute: int, value: float
    ) -> None:
        self.sums[metric_key(namespace, name, dimensions)][minute] += value

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

    def invoke(self, minute: int, version: str, *, error: bool = False) -> None:
        """One invocation of `version` through the alias; `error`: it failed (a crash, a
        timeout, a failed init), which the frontend answers with a 5xx. Lambda publishes
        Errors with every invocation, 0 when it succeeded."""
        self._lambda("Invocations", minute, version)
        self._lambda("Errors", minute, version, 1.0 if error else 0.0)
        if error:
            self.gateway_5xx(minute)

    def throttle(self, minute: int) -> None:
        """One request refused at the function's concurrency limit: Lambda's Throttles, and
        the gateway's failed invoke (a 503 through INTEGRATION_FAILURE)."""
        self._lambda("Throttles", minute, None)
        self.gateway_5xx(minute)
        self._add("SiglipText", f"{self.stack}-GatewayInvokeFailures", {}, minute, 1.0)

    def gateway_5xx(self, minute: int) -> None:
        dimensions = {"ApiName": self.api_name, "Stage": self.stage}
        self._add("AWS/ApiGateway", "5XXError", dimensions, minute, 1.0)

    def series(self, key: MetricKey) -> dict[int, float]:
        return dict(self.sums.get(key, {}))


def _stat_series(stat: dict[str, Any], metrics: Metrics) -> dict[int, float]:
    metric = stat["Metric"]
    if stat.get("Stat", "Sum") != "Sum" or int(stat.get("Period", 60)) != 60:
        raise ValueError(f"only Sum over 60 s is modelled: {stat}")
    dimensions = {d["Name"]: str(d["Value"]) for d in metric.get("Dimensions", [])}
    return metrics.series(metric_key(metric["Namespace"], metric["MetricName"], dimensions))


def _expression(text: str, inputs: dict[str, dict[int, float]], minutes: range) -> dict[int, float]:
    """A metric-math expression, period by period: a period missing in an operand is missing
    in the result, unless FILL supplies it."""

    def value(node: ast.expr, minute: int) -> float | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.Name):
            return inputs[node.id].get(minute)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "FILL"
            and len(node.args) == 2
        ):
            found = value(node.args[0], minute)
            return found if found is not None else value(node.args[1], minute)
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            left, right = value(node.left, minute), value(node.right, minute)
            if left is None or right is None or (isinstance(node.op, ast.Div) and right == 0):
                return None
            return _ARITHMETIC[type(node.op)](left, right)
        raise ValueError(f"metric math not modelled: {ast.dump(node)}")

    tree = ast.parse(text, mode="eval").body
    results = {minute: value(tree, minute) for minute in minutes}
    return {minute: v for minute, v in results.items() if v is not None}


def alarm_series(alarm: dict[str, Any], metrics: Metrics, minutes: range) -> dict[int, float]:
    """The values an alarm compares with its threshold, by minute (missing: no data)."""
    if "Metrics" not in alarm:
        if alarm.get("Statistic") != "Sum" or int(alarm["Period"]) != 60:
            raise ValueError("only Sum over 60 s is modelled")
        stat = {
            "Metric": {
                k: alarm[k] for k in ("Namespace", "MetricName", "Dimensions") if k in alarm
            },
            "Stat": "Sum",
            "Period": 60,
        }
        return {m: v for m, v in _stat_series(stat, metrics).items() if m in minutes}
    inputs: dict[str, dict[int, float]] = {}
    returned: list[dict[str, Any]] = []
    for query in alarm["Metrics"]:
        if "MetricStat" in query:
            inputs[query["Id"]] = _stat_series(query["MetricStat"], metrics)
        else:
            inputs[query["Id"]] = _expression(query["Expression"], inputs, minutes)
        if query.get("ReturnData", True):
            returned.append(query)
    (result,) = returned
    return {m: v for m, v in inputs[result["Id"]].items() if m in minutes}


def alarm_states(alarm: dict[str, Any], metrics: Metrics, minutes: range) -> list[str]:
    """The alarm's state at the end of each minute: ALARM or OK."""
    series = alarm_series(alarm, metrics, minutes)
    compare = _COMPARE[alarm["ComparisonOperator"]]
    threshold = float(alarm["Threshold"])
    periods = int(alarm["EvaluationPeriods"])
    needed = int(alarm.get("DatapointsToAlarm", periods))
    missing = alarm.get("TreatMissingData", "missing")
    if missing not in ("notBreaching", "breaching"):
        raise ValueError(f"TreatMissingData {missing} is not modelled")
    states = []
    for end in minutes:
        window = range(end - periods + 1, end + 1)
        breaching = sum(
            compare(series[m], threshold) if m in series else missing == "breaching" for m in window
        )
        states.append("ALARM" if breaching >= needed else "OK")
    return states
