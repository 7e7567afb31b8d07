"""A canary rolls back bad versions only, and the alarms that page someone fire on real
trouble only: the production stack's alarms, evaluated on simulated metrics.

The production stack (samconfig.toml's prod environment) is translated by AWS's SAM
translator; the alarms its CodeDeploy deployment group lists (the rollback reasons) are
resolved as CloudFormation deploys them, for a function whose old version is 6 and whose new
one is 7, then evaluated minute by minute against what Lambda and API Gateway publish for a
5-minute canary's requests (devkit/cloudwatch.py): 60 requests a minute, 10% of them to the
new version.

The alarms that notify (and roll nothing back; production behind either frontend, and
Lambda Managed Instances' template) are evaluated the same way over 20 minutes of
healthy traffic with one bad event in it (none may fire), and with each real problem
throughout (the alarms that watch it must fire).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from devkit.cloudwatch import Metrics, alarm_states
from devkit.deployment import MANAGED_INSTANCES_TEMPLATE, TEMPLATE, samconfig_parameters
from devkit.sam import (
    evaluate_conditions,
    parameter_defaults,
    resolve,
    resources_of_type,
    source_template,
    translate,
)

TOPIC = "arn:aws:sns:us-east-1:123456789012:siglip-text-alarms"
FUNCTION = "siglip-text-SiglipTextFunction-AbCdEf123456"
OLD, NEW = "6", "7"
#: Canary10Percent5Minutes: the new version takes 10% of requests for five minutes.
CANARY = range(5)
PER_MINUTE = 60
TO_NEW = PER_MINUTE // 10


@functools.cache
def rollback_alarms(frontend: str) -> dict[str, dict[str, Any]]:
    """The alarms that roll a deployment back, as CloudFormation creates them."""
    parameters = {
        **samconfig_parameters("prod"),
        "AlarmTopicArn": TOPIC,
        "Frontend": frontend,
        "ReservedConcurrency": "20",
    }
    cfn = translate(parameters)
    (group,) = resources_of_type(cfn, "AWS::CodeDeploy::DeploymentGroup").values()
    configuration = resolve(cfn, group["Properties"]["AlarmConfiguration"], parameters)
    assert configuration["Enabled"] is True
    (version_id,) = resources_of_type(cfn, "AWS::Lambda::Version")
    refs = {"SiglipTextFunction": FUNCTION, f"{version_id}.Version": NEW}
    alarms = {}
    for entry in configuration["Alarms"]:
        name = entry["Name"].removeprefix("<Ref ").removesuffix(">")
        alarms[name] = resolve(cfn, cfn["Resources"][name]["Properties"], parameters, refs)
    return alarms


def canary(*, old_errors: int = 0, new_errors: int = 0, throttles: int = 0) -> Metrics:
    """What a canary's five minutes publish: each minute 54 requests to the old version and 6
    to the new, the first `old_errors` and `new_errors` of each minute failing; `throttles`
    more requests refused at the concurrency limit each minute."""
    metrics = Metrics(function=FUNCTION)
    for minute in CANARY:
        for i in range(PER_MINUTE - TO_NEW):
            metrics.invoke(minute, OLD, error=i < old_errors)
        for i in range(TO_NEW):
            metrics.invoke(minute, NEW, error=i < new_errors)
        for _ in range(throttles):
            metrics.throttle(minute)
    return metrics


def states(frontend: str, metrics: Metrics) -> dict[str, list[str]]:
    return {
        name: alarm_states(alarm, metrics, CANARY)
        for name, alarm in rollback_alarms(frontend).items()
    }


@pytest.mark.parametrize("frontend", ["rest-api", "function-url"])
def test_one_error_of_the_old_version_does_not_roll_back_the_new_one(frontend: str) -> None:
    # GIVEN a canary during which the OLD version fails one request, once
    metrics = Metrics(function=FUNCTION)
    metrics.invoke(2, OLD, error=True)
    for minute in CANARY:
        for _ in range(TO_NEW):
            metrics.invoke(minute, NEW)
    # THEN no rollback alarm fires at any minute
    found = states(frontend, metrics)
    assert found and all(state == "OK" for row in found.values() for state in row), found


@pytest.mark.parametrize("frontend", ["rest-api", "function-url"])
def test_a_new_version_that_fails_every_request_rolls_back_during_the_canary(
    frontend: str,
) -> None:
    # GIVEN a new version that fails each of its requests (the old one answers all of its)
    found = states(frontend, canary(new_errors=TO_NEW))
    # THEN a rollback alarm fires before the canary's five minutes are over
    assert any("ALARM" in row for row in found.values()), found


def test_one_failed_request_of_the_new_version_is_not_a_rollback() -> None:
    # GIVEN the new version fails one request of its 30 (one minute in five)
    metrics = Metrics(function=FUNCTION)
    for minute in CANARY:
        for i in range(TO_NEW):
            metrics.invoke(minute, NEW, error=minute == 1 and i == 0)
    # THEN it is not rolled back: one datapoint, not two of three
    assert all(state == "OK" for row in states("rest-api", metrics).values() for state in row)


def test_throttles_are_not_a_rollback_reason() -> None:
    # GIVEN a healthy canary whose stage is saturated: 10 requests a minute refused at the
    # concurrency limit (Lambda's Throttles; API Gateway's 503s and failed invokes)
    found = states("rest-api", canary(throttles=10))
    # THEN nothing rolls back: a throttle says nothing about the new version
    assert all(state == "OK" for row in found.values() for state in row), found


def test_the_rollback_alarm_watches_the_new_versions_invocations_of_live() -> None:
    # (what makes the tests above hold: the ExecutedVersion of `live`'s invocations)
    alarms = rollback_alarms("rest-api")
    assert set(alarms) == {"NewVersionErrorRateAlarm"}
    alarm = alarms["NewVersionErrorRateAlarm"]
    stats = [query["MetricStat"] for query in alarm["Metrics"] if "MetricStat" in query]
    assert {stat["Metric"]["MetricName"] for stat in stats} == {"Errors", "Invocations"}
    for stat in stats:
        dimensions = {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]}
        assert dimensions == {
            "FunctionName": FUNCTION,
            "Resource": f"{FUNCTION}:live",
            "ExecutedVersion": NEW,
        }
    assert int(alarm["EvaluationPeriods"]) >= int(alarm["DatapointsToAlarm"]) >= 2
    assert alarm["AlarmActions"] == [TOPIC]


# --- the alarms that notify: quiet on one event, loud on their signal -------------------------

#: The reservation of samconfig's prod line (the concurrency alarm compares with it).
RESERVED = int(samconfig_parameters("prod")["ReservedConcurrency"])
#: A scenario's length: enough for every alarm's evaluation (the longest: 10 minutes, or 3
#: five-minute periods) to end inside it.
MINUTES = range(20)
#: Healthy traffic: requests per minute, each this long (ms).
STEADY, FAST_MS = 120, 60.0


#: The stacks whose notifying alarms are evaluated: production behind either frontend
#: (template.yaml), and Lambda Managed Instances (their own template, its samconfig line).
STACKS = ["rest-api", "function-url", "managed-instances"]


@functools.cache
def notifying_alarms(stack: str) -> dict[str, dict[str, Any]]:
    """The alarms a production stack creates that notify and roll nothing back, as
    CloudFormation creates them (the access log on, so its failed-invoke alarm too)."""
    if stack == "managed-instances":
        path = MANAGED_INSTANCES_TEMPLATE
        parameters = {**samconfig_parameters(stack), "AlarmTopicArn": TOPIC}
        rollback: dict[str, Any] = {}
    else:
        path = TEMPLATE
        parameters = {
            **samconfig_parameters("prod"),
            "AlarmTopicArn": TOPIC,
            "Frontend": stack,
            "ApiAccessLogs": "on",
        }
        rollback = rollback_alarms(stack)
    cfn = translate(parameters, path=path)
    conditions = evaluate_conditions(cfn, parameter_defaults(source_template(path), **parameters))
    (version_id,) = resources_of_type(cfn, "AWS::Lambda::Version")
    refs = {
        "SiglipTextFunction": FUNCTION,
        "SiglipTextManagedFunction": FUNCTION,
        f"{version_id}.Version": NEW,
    }
    return {
        name: resolve(cfn, alarm["Properties"], parameters, refs)
        for name, alarm in resources_of_type(cfn, "AWS::CloudWatch::Alarm").items()
        if conditions[alarm["Condition"]] and name not in rollback
    }


def steady(metrics: Metrics, *, per_minute: int = STEADY) -> Metrics:
    """Healthy traffic in every minute of the scenario: fast answers, a few executions."""
    for minute in MINUTES:
        for _ in range(per_minute):
            metrics.invoke(minute, NEW, duration_ms=FAST_MS)
        metrics.concurrency(minute, 2)
    return metrics


def one_error(metrics: Metrics) -> None:
    metrics.invoke(7, NEW, error=True)


def one_throttle(metrics: Metrics) -> None:
    metrics.throttle(7)


def one_cold_start(metrics: Metrics) -> None:
    metrics.invoke(7, NEW, duration_ms=9000.0)


def one_slow_invocation(metrics: Metrics) -> None:
    # near the 28 s timeout, once
    metrics.invoke(7, NEW, duration_ms=27000.0)


def one_concurrency_peak(metrics: Metrics) -> None:
    metrics.concurrency(7, RESERVED)


def one_failed_key_refresh(metrics: Metrics) -> None:
    metrics.key_refresh_failed(7)


ONE_EVENT = [
    one_error,
    one_throttle,
    one_cold_start,
    one_slow_invocation,
    one_concurrency_peak,
    one_failed_key_refresh,
]


def states_of(alarms: dict[str, dict[str, Any]], metrics: Metrics) -> dict[str, list[str]]:
    return {name: alarm_states(alarm, metrics, MINUTES) for name, alarm in alarms.items()}


@pytest.mark.parametrize("frontend", STACKS)
def test_every_notifying_alarm_says_ok_too(frontend: str) -> None:
    alarms = notifying_alarms(frontend)
    assert len(alarms) >= (4 if frontend == "managed-instances" else 7), sorted(alarms)
    for name, alarm in alarms.items():
        assert alarm["AlarmActions"] == [TOPIC], name
        assert alarm["OKActions"] == [TOPIC], name


@pytest.mark.parametrize("event", ONE_EVENT, ids=lambda f: f.__name__)
@pytest.mark.parametrize("frontend", STACKS)
@pytest.mark.parametrize("per_minute", [STEADY, 1])
def test_no_notifying_alarm_fires_on_one_event(frontend: str, event: Any, per_minute: int) -> None:
    # GIVEN healthy traffic (busy, or one request a minute) and one bad event in it
    metrics = steady(Metrics(function=FUNCTION), per_minute=per_minute)
    event(metrics)
    # THEN no alarm that pages anyone fires, at any minute
    found = states_of(notifying_alarms(frontend), metrics)
    assert all(state == "OK" for row in found.values() for state in row), {
        name: row for name, row in found.items() if "ALARM" in row
    }


@pytest.mark.parametrize("frontend", STACKS)
def test_a_few_errors_among_many_requests_do_not_page(frontend: str) -> None:
    # GIVEN busy traffic in which one request fails in each of three minutes (under 1%)
    metrics = steady(Metrics(function=FUNCTION))
    for minute in (3, 4, 5):
        metrics.invoke(minute, NEW, error=True)
    # THEN nobody is paged: a rate, not any nonzero count
    found = states_of(notifying_alarms(frontend), metrics)
    assert all(state == "OK" for row in found.values() for state in row), found


@pytest.mark.parametrize("frontend", STACKS)
def test_cold_starts_at_low_traffic_do_not_page(frontend: str) -> None:
    # GIVEN two requests a minute, one of them a cold start (a new environment) each minute
    metrics = Metrics(function=FUNCTION)
    for minute in MINUTES:
        metrics.invoke(minute, NEW, duration_ms=FAST_MS)
        metrics.invoke(minute, NEW, duration_ms=6000.0)
    # THEN the p99 latency alarm stays OK: a p99 of so few requests is their slowest
    found = states_of(notifying_alarms(frontend), metrics)
    assert all(state == "OK" for row in found.values() for state in row), found


def failing(metrics: Metrics) -> None:
    """A fifth of the requests fail, every minute."""
    for minute in MINUTES:
        for _ in range(STEADY // 5):
            metrics.invoke(minute, NEW, error=True)


def throttled(metrics: Metrics) -> None:
    """A fifth more requests than the reservation admits, every minute."""
    for minute in MINUTES:
        for _ in range(STEADY // 5):
            metrics.throttle(minute)


def slow(metrics: Metrics) -> None:
    """Every request 3 s, busy enough for a p99 to mean something."""
    for minute in MINUTES:
        for _ in range(STEADY):
            metrics.invoke(minute, NEW, duration_ms=3000.0)


def saturated(metrics: Metrics) -> None:
    """The reservation nearly full, every minute."""
    for minute in MINUTES:
        metrics.concurrency(minute, RESERVED - 1)


def near_timeout(metrics: Metrics) -> None:
    """Some invocation takes 25 of the 28 s in every minute."""
    for minute in MINUTES:
        metrics.invoke(minute, NEW, duration_ms=25000.0)


def secret_unreadable(metrics: Metrics) -> None:
    """The key secret cannot be read: each environment fails its read every minute."""
    for minute in MINUTES:
        metrics.key_refresh_failed(minute)


#: Each real signal and the alarms that must fire on it, per frontend.
SIGNALS: dict[str, tuple[Any, dict[str, set[str]]]] = {
    "errors": (
        failing,
        {
            "rest-api": {"FunctionErrorsAlarm", "Api5xxAlarm"},
            "function-url": {"FunctionErrorsAlarm", "Url5xxAlarm"},
            "managed-instances": {"FunctionErrorsAlarm", "Api5xxAlarm"},
        },
    ),
    "throttles": (
        throttled,
        {
            "rest-api": {"ThrottlesAlarm", "GatewayInvokeFailureAlarm", "Api5xxAlarm"},
            "function-url": {"ThrottlesAlarm"},
            "managed-instances": {"Api5xxAlarm"},
        },
    ),
    "latency": (
        slow,
        {
            "rest-api": {"LatencyP99Alarm"},
            "function-url": {"UrlLatencyP99Alarm"},
            "managed-instances": set(),
        },
    ),
    "concurrency": (
        saturated,
        {
            "rest-api": {"ConcurrencyNearReservationAlarm"},
            "function-url": {"ConcurrencyNearReservationAlarm"},
            "managed-instances": set(),
        },
    ),
    "timeout": (
        near_timeout,
        {
            "rest-api": {"DurationNearTimeoutAlarm"},
            "function-url": {"DurationNearTimeoutAlarm"},
            "managed-instances": {"DurationNearTimeoutAlarm"},
        },
    ),
    "keys": (
        secret_unreadable,
        {
            "rest-api": {"KeyRefreshFailuresAlarm"},
            "function-url": {"KeyRefreshFailuresAlarm"},
            "managed-instances": {"KeyRefreshFailuresAlarm"},
        },
    ),
}


@pytest.mark.parametrize("signal", sorted(SIGNALS))
@pytest.mark.parametrize("frontend", STACKS)
def test_each_notifying_alarm_fires_on_its_signal(frontend: str, signal: str) -> None:
    # GIVEN healthy traffic and, throughout, one real problem
    scenario, expected = SIGNALS[signal]
    metrics = steady(Metrics(function=FUNCTION))
    scenario(metrics)
    # THEN the alarms that watch it fire
    found = states_of(notifying_alarms(frontend), metrics)
    fired = {name for name, row in found.items() if "ALARM" in row}
    assert expected[frontend] <= fired, found


@pytest.mark.parametrize("frontend", STACKS)
def test_every_notifying_alarm_has_a_signal_that_fires_it(frontend: str) -> None:
    # (an alarm no signal fires watches a metric nobody publishes: a wrong name or dimension)
    covered = set().union(*(expected[frontend] for _, expected in SIGNALS.values()))
    assert covered == set(notifying_alarms(frontend))
