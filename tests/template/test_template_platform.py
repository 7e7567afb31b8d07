"""What a platform team checks before a team may deploy: a permissions boundary on every role,
JSON logs at one level, the stage's throttle, execution logging and tracing as options, and a
default that sets nothing account-wide.

Each stack is the SAM translator's output (devkit/sam.py) under one of samconfig.toml's own
parameter lines (default, prod, managed-instances), with only the resources whose condition
holds, every value resolved as CloudFormation would.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devkit.deployment import MANAGED_INSTANCES_TEMPLATE, TEMPLATE, samconfig_parameters
from devkit.sam import evaluate_conditions, parameter_defaults, resolve, source_template, translate

TOPIC = "arn:aws:sns:us-east-1:123456789012:siglip-text-alarms"
BOUNDARY = "arn:aws:iam::123456789012:policy/team-boundary"
#: samconfig.toml's environments and the template each deploys.
ENVIRONMENTS = {
    "default": TEMPLATE,
    "prod": TEMPLATE,
    "managed-instances": MANAGED_INSTANCES_TEMPLATE,
}
XRAY_POLICY = "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess"


@dataclass
class Deployed:
    """One deploy: the resources it creates, resolved."""

    resources: dict[str, dict[str, Any]]

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.resources.items() if r["Type"] == resource_type}


def deployed(env: str, **overrides: str) -> Deployed:
    """samconfig's line for `env` (prod with a topic, its one blank), then `overrides`."""
    path = ENVIRONMENTS[env]
    parameters = {**samconfig_parameters(env), **overrides}
    if env == "prod" and not parameters.get("AlarmTopicArn"):
        parameters["AlarmTopicArn"] = TOPIC
    cfn = translate(parameters, path=path)
    values = parameter_defaults(source_template(path), **parameters)
    conditions = evaluate_conditions(cfn, values)
    created = {
        logical_id: resource
        for logical_id, resource in cfn["Resources"].items()
        if conditions.get(resource.get("Condition", ""), True)
    }
    return Deployed(resolve(cfn, created, parameters))


def settings(path: Path) -> dict[str, Any]:
    found: dict[str, Any] = source_template(path)["Mappings"]["Settings"]
    return found


# --- a permissions boundary on every role ---------------------------------------------------


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_every_role_the_stack_creates_gets_the_permissions_boundary(env: str) -> None:
    # GIVEN a deploy of each environment with a boundary
    stack = deployed(env, PermissionsBoundary=BOUNDARY)
    roles = stack.of_type("AWS::IAM::Role")
    assert roles, env
    if env == "prod":  # the function's, the pre-traffic hook's and CodeDeploy's
        assert len(roles) == 3, sorted(roles)
    # THEN each role the stack creates, SAM's and the template's own, has it
    for logical_id, role in roles.items():
        assert role["Properties"].get("PermissionsBoundary") == BOUNDARY, logical_id


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_without_a_boundary_no_role_has_one(env: str) -> None:
    for logical_id, role in deployed(env).of_type("AWS::IAM::Role").items():
        assert "PermissionsBoundary" not in role["Properties"], logical_id


# --- JSON logs at one level -----------------------------------------------------------------


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_every_function_logs_json_at_the_one_level_of_the_settings(env: str) -> None:
    path = ENVIRONMENTS[env]
    level = settings(path)["Function"]["LogLevel"]
    # (Lambda files a line without a level at INFO, as Powertools writes its EMF metrics: a
    # level above INFO would drop every metric; "Log-level filtering", Lambda Developer Guide)
    assert level in ("DEBUG", "INFO")
    functions = deployed(env).of_type("AWS::Lambda::Function")
    assert functions
    for logical_id, function in functions.items():
        logging_config = function["Properties"]["LoggingConfig"]
        assert logging_config["LogFormat"] == "JSON", logical_id
        assert logging_config["ApplicationLogLevel"] == level, logical_id
        assert logging_config["SystemLogLevel"] == level, logical_id
        # AND its own log group, with the stack's retention
        assert str(logging_config["LogGroup"]).startswith("<Ref "), logical_id
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "POWERTOOLS_LOG_LEVEL" in variables:
            assert variables["POWERTOOLS_LOG_LEVEL"] == level, logical_id


def test_powertools_logs_at_the_level_lambda_filters_without_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN the served function's environment as Lambda gives it: Advanced Logging Controls
    # put the application level in AWS_LAMBDA_LOG_LEVEL, the template POWERTOOLS_LOG_LEVEL
    from aws_lambda_powertools import Logger

    (function,) = [
        f
        for k, f in deployed("prod").of_type("AWS::Lambda::Function").items()
        if k == "SiglipTextFunction"
    ]
    variables = function["Properties"]["Environment"]["Variables"]
    monkeypatch.setenv(
        "AWS_LAMBDA_LOG_LEVEL", function["Properties"]["LoggingConfig"]["ApplicationLogLevel"]
    )
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", variables["POWERTOOLS_LOG_LEVEL"])
    # WHEN Powertools builds the function's logger
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Powertools warns when the two levels disagree
        logger = Logger(service=variables["POWERTOOLS_SERVICE_NAME"])
    # THEN it writes at the level Lambda keeps: nothing lost, nothing written for nothing
    assert logger.log_level == logging.getLevelName(settings(TEMPLATE)["Function"]["LogLevel"])


# --- the stage's throttle, execution logging and tracing --------------------------------------


@pytest.mark.parametrize("env", ["default", "prod", "managed-instances"])
@pytest.mark.parametrize(
    ("throttle", "rate", "burst"), [("50/100", "50", "100"), ("7/30", "7", "30")]
)
def test_the_stage_throttle_follows_its_parameter(
    env: str, throttle: str, rate: str, burst: str
) -> None:
    (stage,) = deployed(env, ApiThrottle=throttle).of_type("AWS::ApiGateway::Stage").values()
    (method_settings,) = stage["Properties"]["MethodSettings"]
    assert (method_settings["ThrottlingRateLimit"], method_settings["ThrottlingBurstLimit"]) == (
        rate,
        burst,
    )


def test_the_default_throttle_is_the_one_the_stage_had() -> None:
    # (the cheap default keeps what it had: 50 requests per second, a burst of 100)
    parameter = source_template(TEMPLATE)["Parameters"]["ApiThrottle"]
    assert parameter["Default"] == "50/100"
    assert source_template(MANAGED_INSTANCES_TEMPLATE)["Parameters"]["ApiThrottle"]["Default"] == (
        "50/100"
    )


def test_the_default_neither_traces_nor_logs_executions() -> None:
    stack = deployed("default")
    (stage,) = stack.of_type("AWS::ApiGateway::Stage").values()
    assert stage["Properties"]["TracingEnabled"] is False
    (method_settings,) = stage["Properties"]["MethodSettings"]
    assert method_settings["LoggingLevel"] == "OFF"
    function = stack.resources["SiglipTextFunction"]["Properties"]
    assert "TracingConfig" not in function
    assert function["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"] == "true"
    for logical_id, role in stack.of_type("AWS::IAM::Role").items():
        assert XRAY_POLICY not in role["Properties"].get("ManagedPolicyArns", []), logical_id
    # AND no account-wide setting: the execution log would need API Gateway's account role
    assert not stack.of_type("AWS::ApiGateway::Account")
    assert not stack.of_type("AWS::CloudWatch::Dashboard")


def test_production_may_trace_and_log_executions_without_an_account_wide_setting() -> None:
    # GIVEN production with both options on
    stack = deployed("prod", ApiAccessLogs="on+execution", Tracing="Active")
    (stage,) = stack.of_type("AWS::ApiGateway::Stage").values()
    # THEN the stage traces and logs its executions at ERROR, never a body (query text)
    assert stage["Properties"]["TracingEnabled"] is True
    (method_settings,) = stage["Properties"]["MethodSettings"]
    assert method_settings["LoggingLevel"] == "ERROR"
    assert method_settings["DataTraceEnabled"] is False
    # AND the function traces, with X-Ray's write policy on its role
    function = stack.resources["SiglipTextFunction"]["Properties"]
    assert function["TracingConfig"] == {"Mode": "Active"}
    assert function["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"] == "false"
    role = stack.resources["SiglipTextFunctionRole"]["Properties"]
    assert XRAY_POLICY in role["ManagedPolicyArns"]
    # AND still nothing account-wide: API Gateway's logging role is a prerequisite
    assert not stack.of_type("AWS::ApiGateway::Account")


def test_access_logs_alone_log_no_executions() -> None:
    stack = deployed("prod", ApiAccessLogs="on")
    (stage,) = stack.of_type("AWS::ApiGateway::Stage").values()
    assert stage["Properties"]["MethodSettings"][0]["LoggingLevel"] == "OFF"
    assert "ApiAccessLogGroup" in stack.resources
