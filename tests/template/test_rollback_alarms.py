"""A canary rolls back bad versions only: the alarms of the deployment group, evaluated.

The production stack (samconfig.toml's prod environment) is translated by AWS's SAM
translator; the alarms its CodeDeploy deployment group lists (the rollback reasons) are
resolved as CloudFormation deploys them, for a function whose old version is 6 and whose new
one is 7, then evaluated minute by minute against what Lambda and API Gateway publish for a
5-minute canary's requests (devkit/cloudwatch.py): 60 requests a minute, 10% of them to the
new version.
"""

from __future__ import annotations

from typing import Any

import pytest

from devkit.cloudwatch import Metrics, alarm_states
from devkit.deployment import samconfig_parameters
from devkit.sam import resolve, resources_of_type, translate

TOPIC = "arn:aws:sns:us-east-1:123456789012:siglip-text-alarms"
FUNCTION = "siglip-text-SiglipTextFunction-AbCdEf123456"
OLD, NEW = "6", "7"
#: Canary10Percent5Minutes: the new version takes 10% of requests for five minutes.
CANARY = range(5)
PER_MINUTE = 60
TO_NEW = PER_MINUTE // 10


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
