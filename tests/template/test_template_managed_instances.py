"""template-managed-instances.yaml (the function image on Lambda Managed Instances, a stack of
its own), through AWS's own SAM translator (aws-sam-translator's
AWS::Serverless::CapacityProvider and the function's CapacityProviderConfig), then as
CloudFormation creates it for the given parameters: the resources whose condition holds,
their values resolved; and the template's Rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("samtranslator", reason="aws-sam-translator is in the test extra")

from devkit.deployment import MANAGED_INSTANCES_TEMPLATE, load_template  # noqa: E402
from devkit.rules import refusals  # noqa: E402
from devkit.sam import (  # noqa: E402
    create_only_properties,
    evaluate_conditions,
    lint_findings,
    parameter_defaults,
    parameter_values,
    resolve,
    source_template,
    translate,
)

SUBNETS = "subnet-0a1b2c3d,subnet-4e5f6a7b"
GROUPS = "sg-0123abcd"
TEMPLATE = MANAGED_INSTANCES_TEMPLATE
NEW = {"CapacityProviderSubnetIds": SUBNETS, "CapacityProviderSecurityGroupIds": GROUPS}
SHARED = "arn:aws:lambda:us-east-1:123456789012:capacity-provider:shared-int8"
EXISTING = {"CapacityProviderArn": SHARED}
#: Parameters that reach the Managed Instances function: a change must publish a version.
MANAGED_PARAMETERS = {
    "MemorySize": "16384",
    "MemoryGiBPerVCpu": "2",
    "PerExecutionEnvironmentMaxConcurrency": "4",
    "CapacityProviderArn": "arn:aws:lambda:us-east-1:123456789012:capacity-provider:other",
    "AuthMode": "none",
}
VERSION_DESCRIPTION_MAX = 256
#: The architecture the Build mapping gives the image and every function.
BUILD_ARCHITECTURE = source_template(TEMPLATE)["Mappings"]["Build"]["Image"]["Architecture"]


@dataclass
class Deployed:
    """The translated template as a deploy with `params` creates it."""

    cfn: dict[str, Any]
    params: dict[str, str]

    @property
    def created(self) -> dict[str, dict[str, Any]]:
        conditions = evaluate_conditions(self.cfn, parameter_values(self.cfn, self.params))
        return {
            logical_id: resource
            for logical_id, resource in self.cfn["Resources"].items()
            if conditions.get(resource.get("Condition", ""), True)
        }

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.created.items() if r["Type"] == resource_type}

    def properties(self, logical_id: str) -> dict[str, Any]:
        resolved: dict[str, Any] = resolve(
            self.cfn, self.created[logical_id].get("Properties", {}), self.params
        )
        return resolved


def deploy(**params: str) -> Deployed:
    return Deployed(translate(params, path=TEMPLATE), params)


def _lmi_config(stack: Deployed) -> dict[str, Any]:
    config: dict[str, Any] = stack.properties("SiglipTextManagedFunction")[
        "CapacityProviderConfig"
    ]["LambdaManagedInstancesCapacityProviderConfig"]
    return config


# --- the capacity provider configuration ------------------------------------------------------


def test_a_new_capacity_provider_runs_the_function_with_its_concurrency_set() -> None:
    stack = deploy(**NEW, PerExecutionEnvironmentMaxConcurrency="3", MemoryGiBPerVCpu="2")

    (function_id,) = stack.of_type("AWS::Lambda::Function")
    assert function_id == "SiglipTextManagedFunction"
    assert _lmi_config(stack) == {
        "CapacityProviderArn": "<GetAtt ManagedInstancesCapacityProvider.Arn>",
        "PerExecutionEnvironmentMaxConcurrency": "3",
        "ExecutionEnvironmentMemoryGiBPerVCpu": "2",
    }
    function = stack.properties("SiglipTextManagedFunction")
    assert function["MemorySize"] == "8192"
    assert function["PackageType"] == "Image"
    # Managed Instances take neither; SAM refuses provisioned concurrency with a provider
    assert "ReservedConcurrentExecutions" not in function
    assert not stack.of_type("AWS::Lambda::Alias")["SiglipTextManagedFunctionAliaslive"][
        "Properties"
    ].get("ProvisionedConcurrencyConfig")
    # the processes of an environment share its vCPUs: no spinning thread pools
    assert function["Environment"]["Variables"]["SIGLIP_ORT_ALLOW_SPINNING"] == "false"


def test_the_capacity_provider_has_the_network_instance_types_scaling_and_operator_role() -> None:
    stack = deploy(
        **NEW,
        AllowedInstanceTypes="c8g.*,m8g.*",
        CapacityProviderMaxVCpus="64",
    )

    ((provider_id, _),) = stack.of_type("AWS::Lambda::CapacityProvider").items()
    provider = stack.properties(provider_id)
    assert provider["VpcConfig"] == {"SubnetIds": SUBNETS, "SecurityGroupIds": GROUPS}
    assert provider["InstanceRequirements"] == {
        "Architectures": [BUILD_ARCHITECTURE],
        "AllowedInstanceTypes": "c8g.*,m8g.*",
    }
    assert provider["CapacityProviderScalingConfig"] == {
        "MaxVCpuCount": "64",
        "ScalingMode": "Auto",
    }
    assert provider["PermissionsConfig"] == {
        "CapacityProviderOperatorRoleArn": "<GetAtt ManagedInstancesOperatorRole.Arn>"
    }
    role = stack.properties("ManagedInstancesOperatorRole")
    assert role["ManagedPolicyArns"] == [
        "arn:aws:iam::aws:policy/AWSLambdaManagedEC2ResourceOperator"
    ]
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "lambda.amazonaws.com"}
    # the function runs on the provider's architecture, the image's (the Build mapping)
    assert stack.properties("SiglipTextManagedFunction")["Architectures"] == [BUILD_ARCHITECTURE]


def test_lambda_chooses_the_instances_and_scaling_when_they_are_not_given() -> None:
    stack = deploy(**NEW, CapacityProviderOperatorRoleArn="arn:aws:iam::123456789012:role/ops")

    provider = stack.properties("ManagedInstancesCapacityProvider")
    assert provider["InstanceRequirements"] == {"Architectures": [BUILD_ARCHITECTURE]}
    assert provider["CapacityProviderScalingConfig"] == {"ScalingMode": "Auto"}
    assert provider["PermissionsConfig"] == {
        "CapacityProviderOperatorRoleArn": "arn:aws:iam::123456789012:role/ops"
    }
    assert "ManagedInstancesOperatorRole" not in stack.created


def test_the_function_may_cap_its_own_environments_on_a_shared_provider() -> None:
    capped = deploy(**EXISTING, MaxExecutionEnvironments="12")

    assert capped.properties("SiglipTextManagedFunction")["FunctionScalingConfig"] == {
        "MaxExecutionEnvironments": "12"
    }
    # on the published version too, where Lambda applies it; not a create-only property:
    # a change updates the version in place, it publishes none
    ((version_id, _),) = capped.of_type("AWS::Lambda::Version").items()
    assert capped.properties(version_id)["FunctionScalingConfig"] == {
        "MaxExecutionEnvironments": "12"
    }
    assert "FunctionScalingConfig" not in create_only_properties("AWS::Lambda::Version")
    assert "FunctionScalingConfig" not in deploy(**EXISTING).properties("SiglipTextManagedFunction")


def test_an_existing_capacity_provider_is_used_by_arn_and_none_is_created() -> None:
    stack = deploy(**EXISTING)

    assert _lmi_config(stack)["CapacityProviderArn"] == SHARED
    assert not stack.of_type("AWS::Lambda::CapacityProvider")
    # no operator role: the function's own is the only one
    assert set(stack.of_type("AWS::IAM::Role")) == {"SiglipTextManagedFunctionRole"}


def test_the_rest_api_invokes_the_managed_functions_live_alias_for_its_routes_only() -> None:
    stack = deploy(**EXISTING)
    alias = "SiglipTextManagedFunctionAliaslive"
    assert set(stack.of_type("AWS::Lambda::Alias")) == {alias}
    (api_id,) = stack.of_type("AWS::ApiGateway::RestApi")
    for item in stack.properties(api_id)["Body"]["paths"].values():
        for operation in item.values():
            uri = operation["x-amazon-apigateway-integration"]["uri"]
            assert uri.endswith(":function:<Ref SiglipTextManagedFunction>:live/invocations")
    sources = {stack.properties(p)["SourceArn"] for p in stack.of_type("AWS::Lambda::Permission")}
    assert {source.rsplit("/prod/", 1)[1] for source in sources} == {
        "POST/v1/embeddings",
        "GET/v1/models",
        "POST/tokenize",
        "GET/health",
    }
    for permission in stack.of_type("AWS::Lambda::Permission"):
        assert stack.properties(permission)["FunctionName"] == f"<Ref {alias}>"
    outputs = resolve(stack.cfn, stack.cfn["Outputs"], stack.params)
    assert outputs["FunctionAliasArn"]["Value"] == f"<Ref {alias}>"


def test_its_rest_api_is_template_yamls_on_another_function() -> None:
    # GIVEN the API of each template, the function's name aside
    main = load_template()["Resources"]["SiglipTextApi"]["Properties"]
    managed = load_template(TEMPLATE)["Resources"]["SiglipTextApi"]["Properties"]
    # THEN the same routes, stage settings and gateway responses (OpenAI-shaped errors)
    for key in ("StageName", "OpenApiVersion", "EndpointConfiguration"):
        assert managed[key] == main[key], key
    # the same throttle, from a parameter of the same name (template.yaml's stage adds its
    # optional execution log, which needs the account's logging role)
    (main_settings,) = main["MethodSettings"]
    (managed_settings,) = managed["MethodSettings"]
    assert {k: main_settings[k] for k in managed_settings} == managed_settings
    assert load_template(TEMPLATE)["Parameters"]["ApiThrottle"] == {
        **load_template()["Parameters"]["ApiThrottle"],
        "Description": load_template(TEMPLATE)["Parameters"]["ApiThrottle"]["Description"],
    }
    assert managed["GatewayResponses"] == main["GatewayResponses"]
    renamed = str(managed["DefinitionBody"]).replace(
        "SiglipTextManagedFunction", "SiglipTextFunction"
    )
    assert renamed == str(main["DefinitionBody"])
    # (and no access log: it needs the account's logging role; template.yaml's prod has it)
    assert "AccessLogSetting" not in managed


def test_replaced_versions_are_deleted_so_no_old_version_keeps_instances_running() -> None:
    stack = deploy(**EXISTING)
    ((_, version),) = stack.of_type("AWS::Lambda::Version").items()
    assert "UpdateReplacePolicy" not in version
    assert version.get("DeletionPolicy") != "Retain"
    function = source_template(TEMPLATE)["Resources"]["SiglipTextManagedFunction"]
    assert "UpdateReplacePolicy" not in function


def test_template_yaml_holds_nothing_of_managed_instances() -> None:
    # (sam build of template.yaml builds no Managed Instances function: one image)
    resources = load_template()["Resources"].values()
    assert not [r for r in resources if "CapacityProvider" in r["Type"]]
    assert not [r for r in resources if "CapacityProviderConfig" in r.get("Properties", {})]


# --- the Rules -----------------------------------------------------------------------------


def _refused(**params: str) -> dict[str, list[str]]:
    template = source_template(TEMPLATE)
    return refusals(template, parameter_defaults(template, **params))


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"CapacityProviderSubnetIds": SUBNETS},
        {"CapacityProviderSecurityGroupIds": GROUPS},
    ],
)
def test_a_new_capacity_provider_without_its_network_is_refused(params: dict[str, str]) -> None:
    refused = _refused(**params)

    assert list(refused) == ["NewCapacityProviderNeedsItsNetwork"], refused
    assert all(description for description in refused["NewCapacityProviderNeedsItsNetwork"])


@pytest.mark.parametrize(
    "params",
    [
        NEW,
        EXISTING,
        {**NEW, "CapacityProviderOperatorRoleArn": "arn:aws:iam::123456789012:role/ops"},
    ],
)
def test_compatible_settings_pass_the_rules(params: dict[str, str]) -> None:
    assert _refused(**params) == {}


def test_sam_itself_refuses_provisioned_concurrency_with_a_capacity_provider() -> None:
    # why the template offers neither: the transform would fail, after the upload
    template = source_template(TEMPLATE)
    function = template["Resources"]["SiglipTextManagedFunction"]["Properties"]
    assert "ProvisionedConcurrencyConfig" not in function
    assert "ReservedConcurrentExecutions" not in function
    assert "SnapStart" not in function


# --- versions -------------------------------------------------------------------------------


def _version(stack: Deployed) -> tuple[str, dict[str, Any]]:
    ((logical_id, version),) = stack.of_type("AWS::Lambda::Version").items()
    create_only = create_only_properties("AWS::Lambda::Version")
    properties = {k: v for k, v in version["Properties"].items() if k in create_only}
    return logical_id, resolve(stack.cfn, properties, stack.params)


@pytest.mark.parametrize(("name", "value"), sorted(MANAGED_PARAMETERS.items()))
def test_a_change_that_reaches_the_managed_function_publishes_a_version(
    name: str, value: str
) -> None:
    before, after = deploy(**EXISTING), deploy(**{**EXISTING, name: value})

    assert _version(before) != _version(after), f"{name}={value} publishes no new version"


def test_the_managed_version_description_fits_with_the_longest_values() -> None:
    longest = {
        **EXISTING,
        "CapacityProviderArn": "arn:aws-us-gov:lambda:us-gov-west-1:123456789012:capacity-provider:"
        + "p" * 60,
        "MemorySize": "32768",
        "MemoryGiBPerVCpu": "8",
        "PerExecutionEnvironmentMaxConcurrency": "1600",
        "AuthMode": "api-key",
    }

    _, properties = _version(deploy(**longest))

    assert len(properties["Description"]) <= VERSION_DESCRIPTION_MAX, properties["Description"]


@pytest.mark.slow
def test_translated_managed_instances_templates_pass_cfn_lint() -> None:
    pytest.importorskip("cfnlint.api", reason="cfn-lint is in the test extra")
    for params in (NEW, EXISTING, {**NEW, "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:t"}):
        cfn = translate(params, path=TEMPLATE)
        rest = lint_findings(cfn, TEMPLATE)
        assert rest == [], "\n".join(str(m) for m in rest)
