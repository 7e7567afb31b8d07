"""A first deploy a stranger can run: a small surface, a default that stays inside its own
stack and costs little at zero traffic, a production environment that asks for what it
needs, and the rules CloudFormation checks before it changes anything.

The stacks are the SAM translator's output (devkit/sam.py) under samconfig.toml's own
parameter lines: `sam deploy` (default) and `sam deploy --config-env prod`.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from devkit.deployment import (
    MANAGED_INSTANCES_TEMPLATE,
    TEMPLATE,
    load_template,
    samconfig_parameters,
)
from devkit.paths import ROOT
from devkit.readme import section, table_rows
from devkit.rules import constraint_refusals, refusals
from devkit.sam import parameter_defaults, source_template, translate
from devkit.stacks import Stack, deploy

TOPIC = "arn:aws:sns:us-east-1:123456789012:siglip-text-alarms"
PSEUDO = {
    "AWS::AccountId",
    "AWS::NoValue",
    "AWS::NotificationARNs",
    "AWS::Partition",
    "AWS::Region",
    "AWS::StackId",
    "AWS::StackName",
    "AWS::URLSuffix",
}
#: The most parameters `sam deploy --guided` may ask for (it asks one question per parameter).
MOST_PARAMETERS = 14
#: The default's monthly cost at zero traffic may not exceed this (the API key's secret
#: included), for an image of this many GB in ECR (a base fp32 bundle's image, about 1.4).
COST_GOAL_USD, IMAGE_GB = 1.00, 1.5


def default_stack() -> Stack:
    return deploy(**samconfig_parameters("default"))


def production_stack(**overrides: str) -> Stack:
    return deploy(**{**samconfig_parameters("prod"), "AlarmTopicArn": TOPIC, **overrides})


# --- a small surface -------------------------------------------------------------------------


def test_the_template_asks_for_at_most_fourteen_parameters() -> None:
    parameters = load_template()["Parameters"]
    assert len(parameters) <= MOST_PARAMETERS, sorted(parameters)
    # AND each says what it is for (guided shows none of it: the Description is the doc)
    assert all(len(spec.get("Description", "")) > 20 for spec in parameters.values())


def test_the_settings_that_are_not_parameters_hold_what_each_needs() -> None:
    settings = load_template()["Mappings"]["Settings"]
    function = settings["Function"]
    # the key cache refreshes before the staleness bound (the function refuses to start
    # otherwise: settings.py)
    assert 10 <= int(function["ApiKeyCacheSeconds"]) <= int(function["ApiKeyMaxStalenessSeconds"])
    # the function gives up before API Gateway's 29-second integration timeout
    assert int(function["Timeout"]) < 29
    # inputs per request: derived by the function ("auto"), or a number up to OpenAI's 2048
    assert (
        function["MaxInputsPerRequest"] == "auto"
        or 1 <= int(function["MaxInputsPerRequest"]) <= 2048
    )
    # Managed Instances take the same constants (their own template)
    managed = load_template(MANAGED_INSTANCES_TEMPLATE)["Mappings"]
    for group, values in managed["Settings"].items():
        for name, value in values.items():
            assert settings[group][name] == value, (group, name)
    assert managed["Build"] == load_template()["Mappings"]["Build"]


@pytest.mark.parametrize("path", [TEMPLATE, MANAGED_INSTANCES_TEMPLATE], ids=lambda p: p.name)
@pytest.mark.parametrize("env", ["default", "prod"])
def test_every_reference_names_a_resource_the_translated_template_declares(
    path: Any, env: str
) -> None:
    # CloudFormation refuses a template that refers to an undeclared resource anywhere, in a
    # resource whose condition is false too ("Unresolved resource dependencies")
    parameters = {}
    if path == TEMPLATE:
        parameters = {**samconfig_parameters(env), "AlarmTopicArn": TOPIC if env == "prod" else ""}
    cfn = translate(parameters, path=path)
    declared = set(cfn["Resources"]) | set(cfn.get("Parameters", {})) | PSEUDO
    for logical_id, resource in cfn["Resources"].items():
        assert referred(resource) <= declared, (logical_id, referred(resource) - declared)
    for name, output in cfn.get("Outputs", {}).items():
        assert referred(output) <= declared, name


def referred(item: Any) -> set[str]:
    """The logical ids a value refers to (Ref, GetAtt, the names of a Sub), every branch."""
    found: set[str] = set()
    if isinstance(item, dict):
        if set(item) == {"Ref"}:
            return {item["Ref"]}
        if set(item) == {"Fn::GetAtt"}:
            target = item["Fn::GetAtt"]
            return {target[0] if isinstance(target, list) else target.split(".")[0]}
        if set(item) == {"Fn::Sub"}:
            text, names = (
                (item["Fn::Sub"], {}) if isinstance(item["Fn::Sub"], str) else item["Fn::Sub"]
            )
            for name in re.findall(r"\$\{([^}!][^}]*)\}", text):
                if name not in names:
                    found.add(name.split(".")[0])
            return found | referred(names)
        for key, value in item.items():
            if key not in ("Condition", "DependsOn", "Metadata"):
                found |= referred(value)
    elif isinstance(item, list):
        for value in item:
            found |= referred(value)
    return found


# --- the default: its own stack only, cheap at zero traffic ---------------------------------


def test_the_default_deploy_changes_nothing_outside_its_own_stack() -> None:
    stack = default_stack()
    types = {resource["Type"] for resource in stack.resources.values()}
    # no account-wide setting (API Gateway's logging role), nothing kept after a delete but
    # the versions (for rollback), no WAF, no alarms, no CodeDeploy
    assert "AWS::ApiGateway::Account" not in types
    kept = {
        logical_id
        for logical_id, resource in stack.resources.items()
        if resource.get("DeletionPolicy") == "Retain"
    }
    assert {stack.resources[k]["Type"] for k in kept} <= {"AWS::Lambda::Version"}
    assert not {t for t in types if t.startswith(("AWS::WAFv2", "AWS::CodeDeploy"))}
    assert "AWS::CloudWatch::Alarm" not in types
    # AND its only role is the function's own
    assert set(stack.of_type("AWS::IAM::Role")) == {"SiglipTextFunctionRole"}


def cost_table() -> dict[str, float]:
    """docs/deploy.md's table of the default stack's fixed monthly costs: resource type ->
    USD a month (per GB-month for ECR's storage)."""
    rows = table_rows(section(ROOT / "docs" / "deploy.md", "## Cost at zero traffic"))
    prices = {}
    for row in rows:
        (amount,) = re.findall(r"\$(\d+(?:\.\d+)?)", row[-1])
        for resource_type in re.findall(r"`((?:AWS::\w+::\w+)|(?:ECR image storage))`", row[0]):
            prices[resource_type] = float(amount)
    return prices


def test_the_default_costs_at_most_a_dollar_a_month_at_zero_traffic() -> None:
    # GIVEN the default stack and docs/deploy.md's price of each resource type it creates
    stack = default_stack()
    prices = cost_table()
    created = [resource["Type"] for resource in stack.resources.values()]
    assert set(created) <= set(prices), set(created) - set(prices)
    # THEN the stack (the key's secret included) and its image in ECR stay within the goal
    total = sum(prices[t] for t in created) + prices["ECR image storage"] * IMAGE_GB
    assert total <= COST_GOAL_USD, total
    # AND production's extras are not in it
    assert "AWS::WAFv2::WebACL" not in created


# --- production: asks for what it needs ---------------------------------------------------


def test_production_has_waf_gradual_deploys_alarms_and_a_reservation() -> None:
    stack = production_stack()
    types = {resource["Type"] for resource in stack.resources.values()}
    assert {"AWS::WAFv2::WebACL", "AWS::WAFv2::WebACLAssociation"} <= types
    assert "AWS::CodeDeploy::DeploymentGroup" in types
    assert "NewVersionErrorRateAlarm" in stack.resources
    function = stack.resources["SiglipTextFunction"]["Properties"]
    reserved = int(stack.value(function["ReservedConcurrentExecutions"]))
    assert reserved == int(samconfig_parameters("prod")["ReservedConcurrency"]) > 0
    # AND the access log, with the account's logging role as a prerequisite it never sets
    assert "ApiAccessLogGroup" in stack.resources
    assert "AWS::ApiGateway::Account" not in types


def test_production_refuses_to_deploy_without_an_alarm_topic() -> None:
    # GIVEN samconfig's prod line as it ships (its AlarmTopicArn is yours to give)
    parameters = parameter_defaults(load_template(), **samconfig_parameters("prod"))
    assert parameters["AlarmTopicArn"] == ""
    # THEN CloudFormation's rules refuse it, saying why
    refused = refusals(load_template(), parameters)
    assert list(refused) == ["GradualDeployNeedsAnAlarmTopic"]
    parameters["AlarmTopicArn"] = TOPIC
    assert refusals(load_template(), parameters) == {}


# --- rules: what CloudFormation refuses before it changes anything ---------------------------


def refused(**overrides: str) -> set[str]:
    template = source_template()
    parameters = parameter_defaults(template, **overrides)
    return set(refusals(template, parameters)) | set(constraint_refusals(template, parameters))


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, set()),
        ({"WafRateLimitPerIp": "9"}, {"WafRateLimitPerIp"}),
        ({"WafRateLimitPerIp": "1"}, {"WafRateLimitPerIp"}),
        ({"WafRateLimitPerIp": "05"}, {"WafRateLimitPerIp"}),
        ({"WafRateLimitPerIp": "10"}, set()),
        ({"WafRateLimitPerIp": "2000"}, set()),
        ({"AuthMode": "iam"}, {"IamAuthIsAFunctionUrlSetting"}),
        ({"Frontend": "function-url"}, {"PublicFunctionUrlNeedsReservedConcurrency"}),
        ({"Frontend": "function-url", "AuthMode": "iam"}, set()),
        ({"Frontend": "function-url", "ReservedConcurrency": "10"}, set()),
        ({"TrafficShifting": "AllAtOnce"}, {"GradualDeployNeedsAnAlarmTopic"}),
        ({"TrafficShifting": "AllAtOnce", "AlarmTopicArn": TOPIC}, set()),
        ({"IndexFingerprint": "sha256:abc"}, {"IndexFingerprint"}),
        ({"IndexFingerprint": "sha256:" + "0" * 64}, set()),
    ],
)
def test_rules_and_constraints_refuse_what_cannot_work(
    overrides: dict[str, str], expected: set[str]
) -> None:
    assert refused(**overrides) == expected
