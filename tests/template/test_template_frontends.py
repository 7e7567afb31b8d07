"""The two frontends of template.yaml, through AWS's own SAM translator.

`Frontend=rest-api` (the default) puts an API Gateway REST API in front of the "live" alias,
`Frontend=function-url` a Lambda function URL on the same alias. Each test translates the
template as CloudFormation does on deploy (devkit/sam.py), then keeps the resources
whose condition holds for the given parameters, as CloudFormation would create them.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from devkit.deployment import load_template
from devkit.sam import (
    ACCOUNT_ID,
    REGION,
    create_only_properties,
    evaluate_conditions,
    parameter_defaults,
    resolve,
)
from devkit.stacks import FRONTENDS, Stack, deploy

PSEUDO = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT_ID,
    "AWS::Partition": "aws",
    "AWS::StackName": "siglip-text",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::NoValue": "",
}


def references(item: Any, stack: Stack) -> set[str]:
    """Logical ids that a value refers to (Ref, GetAtt, Sub), in the branches that are taken."""
    found: set[str] = set()

    def walk(value: Any, local: frozenset[str] = frozenset()) -> None:
        if isinstance(value, dict) and len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                found.add(arg)
                return
            if key == "Fn::GetAtt":
                found.add(arg[0] if isinstance(arg, list) else arg.split(".")[0])
                return
            if key == "Fn::If":
                name, then, otherwise = arg
                walk(then if stack.conditions[name] else otherwise, local)
                return
            if key == "Fn::Sub":
                text, names = (arg, {}) if isinstance(arg, str) else arg
                for name in re.findall(r"\$\{([^}!][^}]*)\}", text):
                    if name not in names:
                        found.add(name.split(".")[0])
                walk(names, local)
                return
        if isinstance(value, dict):
            for inner in value.values():
                walk(inner, local)
        elif isinstance(value, list):
            for inner in value:
                walk(inner, local)

    walk(item)
    return found - set(stack.params) - set(PSEUDO)


# --- both frontends ----------------------------------------------------------------------------


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_each_frontend_translates_to_a_stack_whose_references_all_exist(frontend: str) -> None:
    # GIVEN the template translated by the real SAM translator for this frontend
    stack = deploy(Frontend=frontend)
    # THEN every resource and output it creates refers only to resources it also creates
    # (a function Event would give its API permission no condition: a dangling Ref)
    created = set(stack.resources)
    for logical_id, resource in stack.resources.items():
        body = {k: v for k, v in resource.items() if k != "Condition"}
        assert references(body, stack) <= created, logical_id
    for name, output in stack.cfn["Outputs"].items():
        if stack.conditions.get(output.get("Condition", ""), True):
            assert references(output["Value"], stack) <= created, name


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_a_frontend_deploys_its_own_entry_point_and_not_the_other(frontend: str) -> None:
    stack = deploy(Frontend=frontend)
    types = {r["Type"] for r in stack.resources.values()}
    gateway = {t for t in types if t.startswith("AWS::ApiGateway::")}
    urls = stack.of_type("AWS::Lambda::Url")
    if frontend == "rest-api":
        # (no AWS::ApiGateway::Account: the stack never changes the account's settings)
        assert gateway == {
            "AWS::ApiGateway::RestApi",
            "AWS::ApiGateway::Deployment",
            "AWS::ApiGateway::Stage",
        }
        assert urls == {}
    else:
        assert gateway == set()
        assert len(urls) == 1
    invokers = {
        stack.value(p["Properties"]["Principal"])
        for p in stack.of_type("AWS::Lambda::Permission").values()
    }
    assert invokers == ({"apigateway.amazonaws.com"} if frontend == "rest-api" else {"*"})


@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("auth_mode", ["api-key", "none"])
def test_bearer_key_auth_and_reserved_concurrency_are_wired_for_either_frontend(
    frontend: str, auth_mode: str
) -> None:
    stack = deploy(Frontend=frontend, AuthMode=auth_mode, ReservedConcurrency="3")
    function = stack.resources["SiglipTextFunction"]  # (the other one is the deploy hook)
    props = function["Properties"]
    # THEN the admission bound is the parameter, on the function (all its versions)
    assert stack.value(props["ReservedConcurrentExecutions"]) == "3"
    # AND the function authenticates Bearer keys from the generated secret in api-key mode
    env = stack.value(props["Environment"]["Variables"])
    assert env["SIGLIP_AUTH_MODE"] == auth_mode
    secrets = stack.of_type("AWS::SecretsManager::Secret")
    if auth_mode == "api-key":
        (secret_id,) = secrets
        assert env["SIGLIP_API_KEY_SECRET_ARN"] == {"Ref": secret_id}
        role = stack.resources["SiglipTextFunctionRole"]
        statements = [
            s
            for policy in stack.value(role["Properties"]["Policies"])
            for s in policy["PolicyDocument"]["Statement"]
        ]
        assert any(
            s["Action"] == ["secretsmanager:GetSecretValue"]
            and s["Resource"]["Fn::Sub"][1]["secretArn"] == {"Ref": secret_id}
            for s in statements
        )
    else:
        assert secrets == {} and "SIGLIP_API_KEY_SECRET_ARN" not in env


def test_no_provisioned_concurrency_is_configured_on_the_alias() -> None:
    # (SnapStart is the cold-start remedy offered; see template.yaml's comment)
    for frontend in FRONTENDS:
        _, alias = deploy(Frontend=frontend, ReservedConcurrency="2").alias
        assert "ProvisionedConcurrencyConfig" not in alias["Properties"]


# --- Frontend=function-url ---------------------------------------------------------------------


def test_function_url_is_on_the_live_alias_public_with_both_invoke_permissions() -> None:
    # GIVEN Frontend=function-url with the default AuthMode (api-key: a public URL)
    stack = deploy(Frontend="function-url", ReservedConcurrency="5")
    alias_id, alias = stack.alias
    _, url = stack.one("AWS::Lambda::Url")
    props = stack.value(url["Properties"])
    # THEN the URL targets the "live" alias (the version the deploy published), buffered
    assert props["TargetFunctionArn"] == {"Ref": alias_id}
    assert alias["Properties"]["FunctionVersion"]["Fn::GetAtt"][0] in stack.of_type(
        "AWS::Lambda::Version"
    )
    assert props["AuthType"] == "NONE" and props["InvokeMode"] == "BUFFERED"
    assert "Cors" not in props  # CORS off by default
    # AND anyone may invoke the alias, but lambda:InvokeFunction only through the URL
    permissions = [
        stack.value(p["Properties"]) for p in stack.of_type("AWS::Lambda::Permission").values()
    ]
    by_action = {p["Action"]: p for p in permissions}
    assert set(by_action) == {"lambda:InvokeFunctionUrl", "lambda:InvokeFunction"}
    assert by_action["lambda:InvokeFunctionUrl"]["FunctionUrlAuthType"] == "NONE"
    assert by_action["lambda:InvokeFunction"]["InvokedViaFunctionUrl"] is True
    for permission in permissions:
        assert permission["FunctionName"] == {"Ref": alias_id}
        assert permission["Principal"] == "*"


@pytest.mark.slow
def test_function_url_with_iam_auth_grants_nobody_and_the_function_checks_no_key() -> None:
    stack = deploy(Frontend="function-url", AuthMode="iam")
    _, url = stack.one("AWS::Lambda::Url")
    assert stack.value(url["Properties"]["AuthType"]) == "AWS_IAM"
    assert stack.of_type("AWS::Lambda::Permission") == {}  # callers' own IAM policies grant
    # SigV4 takes the Authorization header: the function itself checks no Bearer key
    env = stack.value(stack.resources["SiglipTextFunction"]["Properties"]["Environment"])
    assert env["Variables"]["SIGLIP_AUTH_MODE"] == "none"
    assert stack.of_type("AWS::SecretsManager::Secret") == {}
    # The template's rule refuses iam with the REST API: CloudFormation evaluates it before
    # creating anything.
    rule = stack.cfn["Rules"]["IamAuthIsAFunctionUrlSetting"]
    (assertion,) = rule["Assertions"]

    def refused(**overrides: str) -> bool:
        params = parameter_defaults(load_template(), **overrides)
        checks = {"Conditions": {"applies": rule["RuleCondition"], "holds": assertion["Assert"]}}
        verdict = evaluate_conditions(checks, params)
        return verdict["applies"] and not verdict["holds"]

    assert refused(AuthMode="iam")  # Frontend=rest-api
    assert not refused(Frontend="function-url", AuthMode="iam")
    assert not refused(Frontend="function-url")


def test_function_url_has_no_cors_keys_stay_out_of_browsers() -> None:
    stack = deploy(Frontend="function-url", ReservedConcurrency="5")
    _, url = stack.one("AWS::Lambda::Url")
    assert "Cors" not in url["Properties"]


# --- Frontend=rest-api -------------------------------------------------------------------------


def test_rest_api_routes_proxy_to_the_live_alias_and_may_invoke_only_it() -> None:
    stack = deploy(Frontend="rest-api")
    alias_id, alias = stack.alias
    api_id, api = stack.one("AWS::ApiGateway::RestApi")
    body = api["Properties"]["Body"]
    # GIVEN what CloudFormation makes of each route's integration URI
    for path, item in body["paths"].items():
        for operation in item.values():
            uri = resolve(stack.cfn, operation["x-amazon-apigateway-integration"]["uri"])
            # THEN it names the function's `live` alias by ARN: the function's name (its
            # Ref) and the alias's name, which SAM CLI's start-api resolves too
            assert uri == (
                "arn:aws:apigateway:us-east-1:lambda:path/2015-03-31/functions/"
                "arn:aws:lambda:us-east-1:123456789012:function:<Ref SiglipTextFunction>"
                f":{alias['Properties']['Name']}/invocations"
            ), path
            assert "Alias" not in operation["x-amazon-apigateway-integration"]["uri"]["Fn::Sub"]
    assert alias["Properties"]["Name"] == "live"
    # the gateway's own errors in OpenAI's shape: SAM moved them into the definition
    responses = body["x-amazon-apigateway-gateway-responses"]
    assert responses["INTEGRATION_FAILURE"]["statusCode"] == "503"
    # AND API Gateway may invoke the alias for the stage's four routes, nothing else
    permissions = stack.of_type("AWS::Lambda::Permission").values()
    sources = set()
    for permission in permissions:
        assert stack.value(permission["Properties"]["FunctionName"]) == {"Ref": alias_id}
        sources.add(resolve(stack.cfn, permission["Properties"]["SourceArn"]))
    prefix = f"arn:aws:execute-api:us-east-1:123456789012:<Ref {api_id}>/prod/"
    routes = {
        f"{prefix}{method.upper()}{path}" for path, item in body["paths"].items() for method in item
    }
    assert (
        sources
        == routes
        == {
            prefix + "POST/v1/embeddings",
            prefix + "GET/v1/models",
            prefix + "POST/tokenize",
            prefix + "GET/health",
        }
    )


# --- switching frontend ------------------------------------------------------------------------


@pytest.mark.slow
def test_switching_frontend_leaves_the_function_and_live_on_the_same_version() -> None:
    # A new version is published exactly when what a version snapshots changes (issue 11's
    # rule, tests/template/test_sam_translation.py). The frontend reaches nothing of the function:
    # the same version serves both, so switching (or rolling the switch back) moves no alias
    # and keeps every published version valid behind either frontend.
    published = {}
    for frontend in FRONTENDS:
        stack = deploy(Frontend=frontend)
        function = stack.resources["SiglipTextFunction"]
        ((version_id, version),) = stack.of_type("AWS::Lambda::Version").items()
        _, alias = stack.alias
        assert alias["Properties"]["FunctionVersion"] == {"Fn::GetAtt": [version_id, "Version"]}
        create_only = create_only_properties("AWS::Lambda::Version")
        snapshot = {k: v for k, v in version["Properties"].items() if k in create_only}
        published[frontend] = (
            version_id,
            resolve(stack.cfn, snapshot, {"Frontend": frontend}),
            resolve(stack.cfn, function["Properties"], {"Frontend": frontend}),
        )
    assert published["rest-api"] == published["function-url"]
    # AND what the frontend invokes is that alias in both cases (see the tests above)
