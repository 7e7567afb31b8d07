"""What template.yaml gives a platform team, read from AWS's SAM translator's output.

Each test translates the template as CloudFormation does on deploy (devkit/sam.py) and
keeps the resources whose condition holds under the given parameters
(devkit/stacks.py's `deploy`): the production environment of samconfig.toml
(`sam deploy --config-env prod`) with a gradual deploy, its pre-traffic hook and CodeDeploy's
role, logs that expire, the REST API's access log and its failed-invoke alarm, and request
limits that fit the function's time.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from siglip_text.engine.limits import inputs_in_time
from siglip_text.http.inputs_bound import OPENAI_MAX_INPUTS
from siglip_text.http.response_size import LAMBDA_RESPONSE_LIMIT_BYTES, inputs_that_fit
from siglip_text.settings import Settings

from devkit.deployment import load_template, samconfig_parameters
from devkit.paths import ROOT
from devkit.sam import resolve
from devkit.stacks import FRONTENDS, Stack, deploy

SERVED = "SiglipTextFunction"
HOOK = "DeployHookFunction"
TOPIC = "arn:aws:sns:us-east-1:123456789012:siglip-text-alarms"


def production(**overrides: str) -> Stack:
    """The stack `sam deploy --config-env prod` makes, with a topic given."""
    return deploy(**{**samconfig_parameters("prod"), "AlarmTopicArn": TOPIC, **overrides})


def statements(stack: Stack, role_id: str) -> list[dict[str, Any]]:
    role = stack.resources[role_id]["Properties"]
    return [
        s
        for policy in stack.value(role.get("Policies", []))
        for s in policy["PolicyDocument"]["Statement"]
    ]


def log_group_of(stack: Stack, function_id: str) -> dict[str, Any]:
    function = stack.resources[function_id]["Properties"]
    reference = function["LoggingConfig"]["LogGroup"]
    assert set(reference) == {"Ref"}, reference
    group = stack.resources[reference["Ref"]]
    assert group["Type"] == "AWS::Logs::LogGroup"
    return group


# --- logs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_each_function_logs_to_its_own_group_that_expires(frontend: str) -> None:
    stack = production(Frontend=frontend)
    groups = [log_group_of(stack, SERVED), log_group_of(stack, HOOK)]
    # THEN the served function and the hook each write to a group of the stack, which keeps
    # events 30 days (the template's constant), not forever
    for group in groups:
        assert resolve(stack.cfn, group["Properties"]["RetentionInDays"]) == 30
    assert groups[0] is not groups[1]


def test_the_rest_api_writes_an_access_log_with_ids_status_and_latency_and_no_query_or_key() -> (
    None
):
    stack = production()
    _, stage = stack.one("AWS::ApiGateway::Stage")
    setting = stack.value(stage["Properties"]["AccessLogSetting"])
    # THEN the stage logs to the stack's own group, which expires
    group_id = setting["DestinationArn"]["Fn::GetAtt"][0]
    group = stack.resources[group_id]
    assert group["Type"] == "AWS::Logs::LogGroup"
    assert resolve(stack.cfn, group["Properties"]["RetentionInDays"]) == 30
    # AND each line names the request, its status and latencies, and the gateway's error type
    fields = dict(re.findall(r'"(\w+)":"(\$context\.[\w.]+)"', setting["Format"]))
    assert fields["requestId"] == "$context.requestId"
    assert fields["status"] == "$context.status"
    assert fields["responseLatency"] == "$context.responseLatency"
    assert fields["integrationLatency"] == "$context.integrationLatency"
    assert fields["responseType"] == "$context.error.responseType"
    # AND nothing that carries query text or the key: no body, query string, header or identity
    used = set(re.findall(r"\$context\.[\w.]+", setting["Format"]))
    assert used == set(fields.values())
    assert not {v for v in used if re.search(r"identity|request\.|path|header|apiKey", v)}


def test_the_access_log_is_off_by_default_and_never_with_a_function_url() -> None:
    # (an access log needs the account's API Gateway logging role, which the stack never sets)
    for stack in (deploy(), production(Frontend="function-url")):
        assert "ApiAccessLogGroup" not in stack.resources
        for _, stage in stack.of_type("AWS::ApiGateway::Stage").items():
            assert "AccessLogSetting" not in stack.value(stage["Properties"])
        assert stack.of_type("AWS::ApiGateway::Account") == {}


# --- gradual deploy -----------------------------------------------------------------------


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_a_production_update_shifts_traffic_after_the_hook_and_rolls_back_on_its_alarm(
    frontend: str,
) -> None:
    stack = production(Frontend=frontend)
    _, alias = stack.alias
    update = alias["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]
    # THEN CodeDeploy moves `live`, running the hook before any traffic shifts
    assert update["BeforeAllowTrafficHook"] == {"Ref": HOOK}
    group = stack.resources[update["DeploymentGroupName"]["Ref"]]["Properties"]
    name, config = group["DeploymentConfigName"]["Fn::Sub"]
    assert (name, config) == (
        "CodeDeployDefault.Lambda${ConfigName}",
        {"ConfigName": samconfig_parameters("prod")["TrafficShifting"]},
    )
    # AND rolls back when the deployment fails or its alarm fires
    assert set(group["AutoRollbackConfiguration"]["Events"]) >= {
        "DEPLOYMENT_FAILURE",
        "DEPLOYMENT_STOP_ON_ALARM",
    }
    configuration = stack.value(group["AlarmConfiguration"])
    assert configuration["Enabled"] is True
    alarms = {a["Name"]["Ref"] for a in configuration["Alarms"]}
    # (what it watches, and that it does not roll back good versions:
    # tests/template/test_rollback_alarms.py)
    assert alarms == {"NewVersionErrorRateAlarm"}
    assert alarms <= set(stack.of_type("AWS::CloudWatch::Alarm"))


def test_codedeploy_gets_a_role_for_this_stack_only() -> None:
    stack = production()
    _, alias = stack.alias
    group_id = alias["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]["DeploymentGroupName"]["Ref"]
    group = stack.resources[group_id]["Properties"]
    role_id = group["ServiceRoleArn"]["Fn::GetAtt"][0]
    role = stack.resources[role_id]["Properties"]
    # THEN not SAM's role with AWSCodeDeployRoleForLambda (every alias, every CodeDeployHook_*
    # function, SNS and S3 of the account)
    assert "CodeDeployServiceRole" not in stack.resources
    assert not role.get("ManagedPolicyArns")
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "codedeploy.amazonaws.com"}
    granted: dict[str, Any] = {}
    for statement in statements(stack, role_id):
        actions = statement["Action"]
        for action in [actions] if isinstance(actions, str) else actions:
            granted[action] = resolve(stack.cfn, statement["Resource"])
    function = "arn:aws:lambda:us-east-1:123456789012:function:<Ref SiglipTextFunction>"
    assert granted == {
        "cloudwatch:DescribeAlarms": "*",  # no resource-level permission exists for it
        "lambda:GetAlias": [function, function + ":*"],
        "lambda:UpdateAlias": [function, function + ":*"],
        "lambda:GetProvisionedConcurrencyConfig": [function, function + ":*"],
        "lambda:InvokeFunction": f"<GetAtt {HOOK}.Arn>",
    }


def test_the_hook_is_a_small_zip_function_with_least_privilege() -> None:
    stack = production(IndexFingerprint="sha256:" + "ab" * 32)
    hook = stack.resources[HOOK]["Properties"]
    served = stack.resources[SERVED]["Properties"]
    # THEN it is not a second copy of the function's image: a zip of handler/deploy_hook/ on
    # Lambda's Python runtime (whose boto3 it uses)
    assert "PackageType" not in hook and "ImageUri" not in hook.get("Code", {})
    assert hook["Code"]["S3Key"] != served["Code"]
    assert (hook["Runtime"], hook["Handler"]) == ("python3.13", "pre_traffic.handler")
    source = load_template()["Resources"][HOOK]["Properties"]
    assert source["CodeUri"] == "handler/deploy_hook/"
    assert int(hook["MemorySize"]) <= 256
    # AND SAM's CodeDeploy role may invoke it (its name, CodeDeployHook_*, as AWS's policy
    # for Lambda deployments expects; this stack's role names it)
    assert stack.value(hook["FunctionName"]) == {
        "Fn::Sub": "CodeDeployHook_${AWS::StackName}-pre-traffic"
    }
    # AND it may invoke the new version (not the alias, not $LATEST) and report to CodeDeploy
    env = stack.value(hook["Environment"]["Variables"])
    version_id, _ = next(iter(stack.of_type("AWS::Lambda::Version").items()))
    assert env["SIGLIP_HOOK_TARGET_FUNCTION"] == {"Ref": version_id}
    granted = {
        s["Action"]: s["Resource"]
        for s in statements(stack, f"{HOOK}Role")
        if isinstance(s["Action"], str)
    }
    assert granted["lambda:InvokeFunction"] == {"Ref": version_id}
    report = resolve(stack.cfn, granted["codedeploy:PutLifecycleEventHookExecutionStatus"])
    assert report == "arn:aws:codedeploy:us-east-1:123456789012:deploymentgroup:*"
    # AND with api-key it may read the key, to call /v1 as a client does; it checks the
    # index's fingerprint when one is given
    assert env["SIGLIP_AUTH_MODE"] == "api-key"
    assert env["SIGLIP_API_KEY_SECRET_ARN"] == {"Ref": "ApiKeySecret"}
    assert env["SIGLIP_HOOK_FINGERPRINT"] == "sha256:" + "ab" * 32
    unchecked = production()
    assert "SIGLIP_HOOK_FINGERPRINT" not in unchecked.value(
        unchecked.resources[HOOK]["Properties"]["Environment"]["Variables"]
    )


@pytest.mark.parametrize(
    "shifting", ["Canary10Percent10Minutes", "Linear10PercentEvery1Minute", "AllAtOnce"]
)
def test_every_shifting_choice_keeps_the_hook_and_the_alarm(shifting: str) -> None:
    stack = production(TrafficShifting=shifting)
    _, alias = stack.alias
    update = alias["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]
    assert update["BeforeAllowTrafficHook"] == {"Ref": HOOK}
    group = stack.resources[update["DeploymentGroupName"]["Ref"]]["Properties"]
    assert group["DeploymentConfigName"]["Fn::Sub"][1]["ConfigName"] == shifting
    assert stack.value(group["AlarmConfiguration"])["Enabled"] is True


def test_the_default_deploys_without_codedeploy_or_hook() -> None:
    stack = deploy(**samconfig_parameters("default"))
    _, alias = stack.alias
    assert "UpdatePolicy" not in alias
    assert HOOK not in stack.resources and "DeployHookLogGroup" not in stack.resources
    assert not [t for t in {r["Type"] for r in stack.resources.values()} if "CodeDeploy" in t]


# --- a function the gateway cannot invoke ---------------------------------------------------


def test_a_failed_invoke_is_a_503_counted_from_the_access_log_and_alarmed() -> None:
    stack = production()
    _, api = stack.one("AWS::ApiGateway::RestApi")
    # GIVEN the gateway's answer to any failure to invoke: retryable, no claim of capacity
    failure = api["Properties"]["Body"]["x-amazon-apigateway-gateway-responses"][
        "INTEGRATION_FAILURE"
    ]
    assert failure["statusCode"] == "503"
    assert "at capacity" not in failure["responseTemplates"]["application/json"]
    # THEN a metric counts the access log's INTEGRATION_FAILURE lines ...
    (metric,) = stack.of_type("AWS::Logs::MetricFilter").values()
    _, stage = stack.one("AWS::ApiGateway::Stage")
    setting = stack.value(stage["Properties"]["AccessLogSetting"])
    log_group = setting["DestinationArn"]["Fn::GetAtt"][0]
    assert metric["Properties"]["LogGroupName"] == {"Ref": log_group}
    pattern = metric["Properties"]["FilterPattern"]
    assert pattern == '{ $.responseType = "INTEGRATION_FAILURE" }'
    assert '"responseType":"$context.error.responseType"' in setting["Format"].replace(" ", "")
    (transform,) = metric["Properties"]["MetricTransformations"]
    # ... and an alarm watches that metric (Lambda's own Errors never sees such a request)
    alarm = stack.resources["GatewayInvokeFailureAlarm"]["Properties"]
    watched = [query["MetricStat"]["Metric"] for query in alarm["Metrics"] if "MetricStat" in query]
    assert (transform["MetricNamespace"], transform["MetricName"]) in [
        (metric["Namespace"], metric["MetricName"]) for metric in watched
    ]
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


# --- requests that fit; a custom domain ------------------------------------------------------


def per_input_ms() -> dict[str, tuple[int, float]]:
    """docs/performance.md's MemorySize to choose per bundle, and the query time per input
    measured at it ("MemorySize (est. ms)")."""
    text = (ROOT / "docs" / "performance.md").read_text()
    rows = re.findall(r"^\| ([\w-]+-(?:fp32|int8)) \| \d+ \|(.*)$", text, re.MULTILINE)
    found = {}
    for name, rest in rows:
        cells = [c.strip() for c in rest.split("|")]
        memory, ms = re.fullmatch(r"([\d,]+) \((\d+)\)", cells[7]).groups()  # type: ignore[union-attr]
        found[name] = (int(memory.replace(",", "")), float(ms))
    return found


def test_the_function_derives_its_inputs_bound_from_its_timeout() -> None:
    # GIVEN the function as the template deploys it
    stack = deploy()
    function = load_template()["Mappings"]["Settings"]["Function"]
    variables = stack.resources[SERVED]["Properties"]["Environment"]["Variables"]
    env = {name: resolve(stack.cfn, value, stack.params) for name, value in variables.items()}
    # THEN the bound is derived ("auto"), and the function knows its own Timeout for it
    assert function["MaxInputsPerRequest"] == "auto"
    assert env["SIGLIP_MAX_INPUTS_PER_REQUEST"] == "auto"
    assert float(env["SIGLIP_FUNCTION_TIMEOUT_SECONDS"]) == float(function["Timeout"])


def test_sizes_md_gives_each_size_the_bound_the_function_derives() -> None:
    # GIVEN docs/sizes.md's table of inputs per request, and the measured query times
    text = (ROOT / "docs" / "sizes.md").read_text()
    section = text[text.index("## Inputs per request") :]
    rows = re.findall(r"^\| ([\w-]+-(?:fp32|int8)) \|(.*)$", section, re.MULTILINE)
    measured = per_input_ms()
    assert {name for name, _ in rows} == set(measured)
    dims = {"base": 768, "large": 1024, "so400m": 1152, "giant-opt": 1536}
    timeout_s = float(load_template()["Mappings"]["Settings"]["Function"]["Timeout"])
    reserve_s = Settings.model_fields["time_reserve_ms"].default / 1000
    bounds = {}
    for name, rest in rows:
        memory, ms, by_time, by_response, bound = (
            int(c.strip().replace(",", "")) for c in rest.strip(" |").split("|")
        )
        # THEN each row is the measurement and what inputs_bound.py derives from it
        assert (memory, ms) == (measured[name][0], round(measured[name][1])), name
        assert by_time == inputs_in_time(
            timeout_s=timeout_s, reserve_s=reserve_s, seconds_per_input=measured[name][1] / 1000
        ), name
        assert by_response == inputs_that_fit(
            LAMBDA_RESPONSE_LIMIT_BYTES,
            dimension=dims[name.rsplit("-", 1)[0]],
            encoding="float",
            model="google/siglip2-so400m-patch16-naflex",
            max_tokens=64,
        ), name
        assert bound == min(by_time, by_response, OPENAI_MAX_INPUTS), name
        bounds[name] = bound
    # AND the default bundle at the template's default memory answers 150 texts at once
    default_memory = int(load_template()["Parameters"]["MemorySize"]["Default"])
    assert measured["base-int8"][0] == default_memory
    assert bounds["base-int8"] >= 150


def test_a_custom_domains_base_path_reaches_the_function_and_its_version() -> None:
    stack = deploy(ApiBasePath="embeddings/v2")
    function = stack.resources[SERVED]["Properties"]
    env = stack.value(function["Environment"]["Variables"])
    assert env["SIGLIP_API_BASE_PATH"] == "embeddings/v2"
    (version,) = stack.of_type("AWS::Lambda::Version").values()
    description = resolve(stack.cfn, version["Properties"]["Description"], stack.params)
    assert "base=embeddings/v2" in description
