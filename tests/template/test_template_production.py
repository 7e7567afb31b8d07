"""What template.yaml gives a platform team, read from AWS's SAM translator's output.

Each test translates the template as CloudFormation does on deploy (devkit/sam.py) and
keeps the resources whose condition holds under the given parameters
(tests/support/stacks.py's `deploy`): logs that expire, the REST API's access log, X-Ray
only when tracing is on, a gradual deploy with alarms and a pre-traffic hook, an alarm when
the gateway cannot invoke the function, and request limits that fit the function's time.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from siglip_text.aws import deploy_hook
from siglip_text.engine.limits import LAMBDA_RESPONSE_LIMIT_BYTES, inputs_that_fit

from devkit.deployment import load_template
from devkit.sam import resolve
from tests.support.paths import ROOT
from tests.support.stacks import FRONTENDS, Stack, deploy

SERVED = "SiglipTextFunction"
HOOK = "DeployHookFunction"
#: The template's default: gradual in production (docs/deploy.md says why).
DEFAULT = "Canary10Percent5Minutes"
XRAY_POLICY = "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess"


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
    # GIVEN a deploy with the default retention, and one with another
    for retention in (None, "7"):
        overrides = {"Frontend": frontend} | ({"LogRetentionDays": retention} if retention else {})
        stack = deploy(**overrides)
        # THEN the served function and the hook each write to a group of the stack, which
        # keeps events LogRetentionDays days (30 by default), not forever
        groups = [log_group_of(stack, SERVED), log_group_of(stack, HOOK)]
        for group in groups:
            assert stack.value(group["Properties"]["RetentionInDays"]) == (retention or "30")
        assert groups[0] is not groups[1]


def test_the_rest_api_writes_an_access_log_with_ids_status_and_latency_and_no_query_or_key() -> (
    None
):
    stack = deploy(Frontend="rest-api")
    _, stage = stack.one("AWS::ApiGateway::Stage")
    setting = stage["Properties"]["AccessLogSetting"]
    # THEN the stage logs to the stack's own group, which expires
    group_id = setting["DestinationArn"]["Fn::GetAtt"][0]
    group = stack.resources[group_id]
    assert group["Type"] == "AWS::Logs::LogGroup"
    assert stack.value(group["Properties"]["RetentionInDays"]) == "30"
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


def test_a_function_url_stack_has_no_access_log_and_no_gateway_logging_role() -> None:
    stack = deploy(Frontend="function-url")
    assert stack.of_type("AWS::ApiGateway::Account") == {}
    groups = stack.of_type("AWS::Logs::LogGroup")
    assert set(groups) == {"FunctionLogGroup", "DeployHookLogGroup"}


@pytest.mark.parametrize(("choice", "created"), [("create", True), ("existing", False)])
def test_the_api_gateway_logging_role_is_set_by_the_stack_only_when_asked(
    choice: str, created: bool
) -> None:
    stack = deploy(Frontend="rest-api", ApiGatewayLogsRole=choice)
    accounts = stack.of_type("AWS::ApiGateway::Account")
    assert bool(accounts) == created
    if created:
        ((_, account),) = accounts.items()
        role_id = account["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0]
        role = stack.resources[role_id]
        assert stack.value(role["Properties"]["ManagedPolicyArns"]) == [
            {
                "Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/service-role/"
                "AmazonAPIGatewayPushToCloudWatchLogs"
            }
        ]
        # kept on delete: other APIs of the account may log with it
        assert account["DeletionPolicy"] == role["DeletionPolicy"] == "Retain"
    # the API waits for the setting (a stage with an access log fails without it)
    api_id, _ = stack.one("AWS::ApiGateway::RestApi")
    source = load_template()["Resources"]["SiglipTextApi"]
    assert source["DependsOn"] == "ApiLogsRoleReady"
    assert "ApiLogsRoleReady" in stack.cfn["Resources"][api_id].get("DependsOn", [])


# --- X-Ray ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tracing", ["Disabled", "Active"])
def test_the_xray_policy_is_on_the_role_only_with_tracing_on(tracing: str) -> None:
    stack = deploy(Tracing=tracing)
    role = stack.resources[f"{SERVED}Role"]["Properties"]
    function = stack.resources[SERVED]["Properties"]
    on = tracing == "Active"
    assert (XRAY_POLICY in role["ManagedPolicyArns"]) == on
    assert ("TracingConfig" in function) == on
    env = stack.value(function["Environment"]["Variables"])
    assert env["POWERTOOLS_TRACE_DISABLED"] == ("false" if on else "true")


# --- gradual deploy -----------------------------------------------------------------------


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_an_update_shifts_traffic_after_the_hook_and_rolls_back_on_any_alarm(frontend: str) -> None:
    # GIVEN the default deploy
    stack = deploy(Frontend=frontend)
    _, alias = stack.alias
    update = alias["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]
    # THEN CodeDeploy moves `live`, running the hook before any traffic shifts
    assert update["BeforeAllowTrafficHook"] == {"Ref": HOOK}
    group = stack.resources[update["DeploymentGroupName"]["Ref"]]["Properties"]
    name, config = group["DeploymentConfigName"]["Fn::Sub"]
    assert (name, config) == ("CodeDeployDefault.Lambda${ConfigName}", {"ConfigName": DEFAULT})
    # AND rolls back when the deployment fails or any alarm fires
    assert set(group["AutoRollbackConfiguration"]["Events"]) >= {
        "DEPLOYMENT_FAILURE",
        "DEPLOYMENT_STOP_ON_ALARM",
    }
    configuration = stack.value(group["AlarmConfiguration"])
    assert configuration["Enabled"] is True
    alarms = {a["Name"]["Ref"] for a in configuration["Alarms"]}
    expected = {"FunctionErrorsAlarm"} | (
        {"Api5xxAlarm", "GatewayInvokeFailureAlarm"} if frontend == "rest-api" else {"Url5xxAlarm"}
    )
    assert alarms == expected
    assert alarms <= set(stack.of_type("AWS::CloudWatch::Alarm"))


def test_the_hook_runs_the_same_image_with_its_own_command_and_least_privilege() -> None:
    stack = deploy()
    hook = stack.resources[HOOK]["Properties"]
    served = stack.resources[SERVED]["Properties"]
    # THEN it is the served function's image, another entry point
    assert hook["PackageType"] == "Image"
    assert hook["Code"] == served["Code"]
    assert hook["ImageConfig"]["Command"] == ["siglip_text.aws.deploy_hook.handler"]
    assert hook["Architectures"] == served["Architectures"]
    # AND SAM's CodeDeploy role may invoke it (AWSCodeDeployRoleForLambda: CodeDeployHook_*)
    assert stack.value(hook["FunctionName"]) == {
        "Fn::Sub": "CodeDeployHook_${AWS::StackName}-pre-traffic"
    }
    # AND it may invoke the new version (not the alias, not $LATEST) and report to CodeDeploy
    env = stack.value(hook["Environment"]["Variables"])
    version_id, _ = next(iter(stack.of_type("AWS::Lambda::Version").items()))
    assert env[deploy_hook.TARGET_ENV] == {"Ref": version_id}  # the name the hook reads
    granted = {
        s["Action"]: s["Resource"]
        for s in statements(stack, f"{HOOK}Role")
        if isinstance(s["Action"], str)
    }
    assert granted["lambda:InvokeFunction"] == {"Ref": version_id}
    report = granted["codedeploy:PutLifecycleEventHookExecutionStatus"]["Fn::Sub"]
    assert ":deploymentgroup:${ServerlessDeploymentApplication}/*" in report
    # AND with api-key it may read the key, to call /v1 as a client does
    assert env["SIGLIP_API_KEY_SECRET_ARN"] == {"Ref": "ApiKeySecret"}


@pytest.mark.parametrize(
    "shifting", ["Canary10Percent10Minutes", "Linear10PercentEvery1Minute", "AllAtOnce"]
)
def test_every_shifting_choice_keeps_the_hook_and_the_alarms(shifting: str) -> None:
    stack = deploy(TrafficShifting=shifting)
    _, alias = stack.alias
    update = alias["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]
    assert update["BeforeAllowTrafficHook"] == {"Ref": HOOK}
    group = stack.resources[update["DeploymentGroupName"]["Ref"]]["Properties"]
    assert group["DeploymentConfigName"]["Fn::Sub"][1]["ConfigName"] == shifting
    assert stack.value(group["AlarmConfiguration"])["Enabled"] is True


def test_traffic_shifting_none_deploys_without_codedeploy_or_hook() -> None:
    stack = deploy(TrafficShifting="None")
    _, alias = stack.alias
    assert "UpdatePolicy" not in alias
    assert HOOK not in stack.resources and "DeployHookLogGroup" not in stack.resources
    assert not [t for t in {r["Type"] for r in stack.resources.values()} if "CodeDeploy" in t]


# --- a function the gateway cannot invoke ---------------------------------------------------


def test_a_failed_invoke_is_a_503_counted_from_the_access_log_and_alarmed() -> None:
    stack = deploy(Frontend="rest-api")
    api_id, api = stack.one("AWS::ApiGateway::RestApi")
    # GIVEN the gateway's answer to any failure to invoke: retryable, no claim of capacity
    failure = api["Properties"]["Body"]["x-amazon-apigateway-gateway-responses"][
        "INTEGRATION_FAILURE"
    ]
    assert failure["statusCode"] == "503"
    assert "at capacity" not in failure["responseTemplates"]["application/json"]
    # THEN a metric counts the access log's INTEGRATION_FAILURE lines ...
    (metric,) = stack.of_type("AWS::Logs::MetricFilter").values()
    _, stage = stack.one("AWS::ApiGateway::Stage")
    log_group = stage["Properties"]["AccessLogSetting"]["DestinationArn"]["Fn::GetAtt"][0]
    assert metric["Properties"]["LogGroupName"] == {"Ref": log_group}
    pattern = metric["Properties"]["FilterPattern"]
    assert pattern == '{ $.responseType = "INTEGRATION_FAILURE" }'
    assert '"responseType":"$context.error.responseType"' in stage["Properties"][
        "AccessLogSetting"
    ]["Format"].replace(" ", "")
    (transform,) = metric["Properties"]["MetricTransformations"]
    # ... and an alarm watches that metric (Lambda's own Errors never sees such a request)
    alarm = stack.resources["GatewayInvokeFailureAlarm"]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"]) == (
        transform["MetricNamespace"],
        transform["MetricName"],
    )
    assert alarm["Threshold"] == 0 and alarm["ComparisonOperator"] == "GreaterThanThreshold"


# --- requests that fit; a custom domain ------------------------------------------------------


def per_input_ms() -> dict[str, float]:
    """docs/performance.md's measured query time per input on 2 vCPUs, per bundle."""
    text = (ROOT / "docs" / "performance.md").read_text()
    rows = re.findall(r"^\| ([\w-]+-(?:fp32|int8)) \| \d+ \|(.*)$", text, re.MULTILINE)
    found = {}
    for name, rest in rows:
        cells = [c.strip() for c in rest.split("|")]
        two_threads, _ = cells[4].split(" / ")
        found[name] = float(two_threads.replace(",", ""))
    return found


def test_the_default_request_fits_the_default_timeout_for_every_size() -> None:
    parameters = load_template()["Parameters"]
    inputs = int(parameters["MaxInputsPerRequest"]["Default"])
    timeout_s = int(parameters["Timeout"]["Default"])
    measured = per_input_ms()
    assert {"base-fp32", "giant-opt-fp32"} <= set(measured)
    # THEN the slowest size's full request leaves a third of Timeout for a cold init and
    # the rest (the 226 ms per input of giant-opt fp32 on 2 vCPUs, docs/performance.md)
    assert inputs * max(measured.values()) / 1000 <= timeout_s * 2 / 3
    # AND nobody can configure more than OpenAI's own limit per request
    assert int(parameters["MaxInputsPerRequest"]["MaxValue"]) == 2048


def test_a_custom_domains_base_path_reaches_the_function_and_its_version() -> None:
    stack = deploy(ApiBasePath="embeddings/v2")
    function = stack.resources[SERVED]["Properties"]
    env = stack.value(function["Environment"]["Variables"])
    assert env["SIGLIP_API_BASE_PATH"] == "embeddings/v2"
    (version,) = stack.of_type("AWS::Lambda::Version").values()
    description = resolve(stack.cfn, version["Properties"]["Description"], stack.params)
    assert "base=embeddings/v2" in description


def test_sizes_md_gives_each_size_the_smaller_of_its_time_and_response_bounds() -> None:
    # GIVEN docs/sizes.md's table of safe inputs per request, and the measured query times
    text = (ROOT / "docs" / "sizes.md").read_text()
    section = text[text.index("## Inputs per request") :]
    rows = re.findall(r"^\| ([\w-]+-(?:fp32|int8)) \|(.*)$", section, re.MULTILINE)
    measured = per_input_ms()
    assert {name for name, _ in rows} == set(measured)
    dims = {"base": 768, "large": 1024, "so400m": 1152, "giant-opt": 1536}
    # the most float vectors the function answers within Lambda's response (limits.py)
    response_bound = {
        d: inputs_that_fit(
            LAMBDA_RESPONSE_LIMIT_BYTES,
            dimension=d,
            encoding="float",
            model="google/siglip2-so400m-patch16-naflex",
            max_tokens=64,
        )
        for d in dims.values()
    }
    for name, rest in rows:
        ms, by_time, by_response, safe = (
            int(c.strip().replace(",", "")) for c in rest.strip(" |").split("|")
        )
        # THEN each row is today's measurement and the smaller bound, rounded down to 16
        assert ms == round(measured[name]), name
        assert by_time == int(20_000 // measured[name]), name
        assert by_response == response_bound[dims[name.rsplit("-", 1)[0]]], name
        assert safe == min(by_time, by_response) // 16 * 16, name
        # AND the template's default is safe for it
        assert int(load_template()["Parameters"]["MaxInputsPerRequest"]["Default"]) <= safe
