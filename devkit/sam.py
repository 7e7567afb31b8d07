"""template.yaml through AWS's own SAM translator, as `sam deploy` has CloudFormation run it.

`sam build` fills in the function's `ImageUri` (the image it built) and `sam deploy` replaces it
with the pushed ECR image; CloudFormation then runs the `AWS::Serverless-2016-10-31` transform
(aws-sam-translator) with the stack's parameter values, defaults filled in for the rest. This
module does the same with the installed aws-sam-translator, offline: the result is the plain
CloudFormation template the stack would be created or updated from. `resolve` is then what
CloudFormation makes of a value of it (parameters, conditions, intrinsic functions): the one
resolver of devkit.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator
from samtranslator.yaml_helper import yaml_parse

from devkit.deployment import SERVED_FUNCTION

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
#: The account and region the translation pretends to deploy to (pseudo parameters).
ACCOUNT_ID = "123456789012"
REGION = "us-east-1"


def image_uri(digest_seed: str = "image") -> str:
    """An ECR image URI of the shape `sam deploy` writes (a tag derived from the image id)."""
    image_id = hashlib.sha256(digest_seed.encode()).hexdigest()
    return (
        f"{ACCOUNT_ID}.dkr.ecr.{REGION}.amazonaws.com/siglip-text:"
        f"sigliptextfunction-{image_id[:12]}-latest"
    )


@functools.cache
def source_template(path: Path = TEMPLATE) -> dict[str, Any]:
    parsed: dict[str, Any] = yaml_parse(path.read_text())
    return parsed


def code_uri(directory: str) -> str:
    """An S3 URI of the shape `sam deploy` writes for a zip function's code (the SAM-managed
    bucket, the zip's MD5 as its key)."""
    key = hashlib.md5(directory.encode(), usedforsecurity=False).hexdigest()
    return f"s3://aws-sam-cli-managed-default-samclisourcebucket-abcdefgh1234/siglip-text/{key}"


def sam_template(path: Path = TEMPLATE, *, image: str | None = None) -> dict[str, Any]:
    """The template as `sam deploy` uploads it: every image function gets its `ImageUri`,
    every zip function its code's S3 URI."""
    template = copy.deepcopy(source_template(path))
    for resource in template.get("Resources", {}).values():
        properties = resource.get("Properties") or {}
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        if properties.get("PackageType") == "Image":
            properties["ImageUri"] = image or image_uri()
        elif isinstance(properties.get("CodeUri"), str):
            properties["CodeUri"] = code_uri(properties["CodeUri"])
    return template


def translate(
    parameters: dict[str, str] | None = None,
    *,
    image: str | None = None,
    path: Path = TEMPLATE,
) -> dict[str, Any]:
    """The CloudFormation template the SAM transform makes of template.yaml.

    `parameters` are the stack's parameter values (`--parameter-overrides`), as strings; the
    translator fills in the template's defaults for the others, as CloudFormation does. `image`
    is the function's ImageUri (see `image_uri`); the same image unless given.
    """
    values: dict[str, Any] = {"AWS::AccountId": ACCOUNT_ID, "AWS::Region": REGION}
    values.update(parameters or {})
    unknown = set(parameters or {}) - set(source_template(path).get("Parameters", {}))
    if unknown:
        raise KeyError(f"not template parameters: {sorted(unknown)}")
    translator = Translator(
        managed_policy_map=None,
        sam_parser=Parser(),
        boto_session=boto3.session.Session(region_name=REGION),
    )
    result: dict[str, Any] = translator.translate(
        sam_template=sam_template(path, image=image),
        parameter_values=values,
        get_managed_policy_map=lambda: {},
    )
    return result


def resources_of_type(cfn: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """The translated template's resources of one type, by logical id."""
    return {
        logical_id: resource
        for logical_id, resource in cfn.get("Resources", {}).items()
        if resource.get("Type") == resource_type
    }


# --- What CloudFormation makes of a template: the one resolver -------------------------------


def _ref_placeholder(logical_id: str) -> str:
    """A stand-in for what only CloudFormation knows: a resource's Ref."""
    return f"<Ref {logical_id}>"


_NO_VALUE = object()


def parameter_defaults(template: dict[str, Any], **overrides: str) -> dict[str, str]:
    """Every parameter's value as CloudFormation passes it (a string): default or override."""
    declared = template.get("Parameters", {})
    unknown = set(overrides) - set(declared)
    if unknown:
        raise KeyError(f"not template parameters: {sorted(unknown)}")
    values = {name: str(spec["Default"]) for name, spec in declared.items() if "Default" in spec}
    values.update(overrides)
    return values


def parameter_values(
    cfn: dict[str, Any], parameters: dict[str, str] | None = None
) -> dict[str, str]:
    """Every parameter as CloudFormation passes it (a string), and the pseudo parameters."""
    values = parameter_defaults(cfn, **(parameters or {}))
    values.update({"AWS::AccountId": ACCOUNT_ID, "AWS::Region": REGION, "AWS::Partition": "aws"})
    values.setdefault("AWS::StackName", "siglip-text")
    values.setdefault("AWS::URLSuffix", "amazonaws.com")
    return values


def evaluate_conditions(cfn: dict[str, Any], values: dict[str, str]) -> dict[str, bool]:
    """Every condition of the template, given every parameter's value (`parameter_defaults`)."""
    walk = _resolver(cfn, values)
    return {name: bool(walk({"Condition": name})) for name in cfn.get("Conditions", {})}


def resolve(
    cfn: dict[str, Any],
    value: Any,
    parameters: dict[str, str] | None = None,
    refs: dict[str, str] | None = None,
) -> Any:
    """`value` with parameters, conditions and the intrinsic functions of the template resolved.

    A resource's Ref and attributes become placeholders that name the resource, so that a value
    changes exactly when what CloudFormation would put there can change; `refs` gives some of
    them a value instead (an ARN a setting must parse).
    """
    return _resolver(cfn, {**parameter_values(cfn, parameters), **(refs or {})})(value)


def _resolver(cfn: dict[str, Any], known: dict[str, str]) -> Callable[[Any], Any]:
    conditions: dict[str, bool] = {}

    def condition(name: str) -> bool:
        if name not in conditions:
            conditions[name] = bool(walk(cfn["Conditions"][name]))
        return conditions[name]

    def substitute(text: str, names: dict[str, Any]) -> str:
        def one(match: Any) -> str:
            name: str = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in names:
                return str(names[name])
            if name in known:
                return known[name]
            return _ref_placeholder(name)

        return re.sub(r"\$\{([^}]+)\}", one, text)

    def walk(item: Any) -> Any:  # noqa: PLR0911, PLR0912
        if isinstance(item, dict) and len(item) == 1:
            ((key, arg),) = item.items()
            if key == "Ref":
                if arg == "AWS::NoValue":
                    return _NO_VALUE
                return known[arg] if arg in known else _ref_placeholder(arg)
            if key == "Fn::GetAtt":
                target = arg if isinstance(arg, str) else ".".join(arg)
                return known.get(target, f"<GetAtt {target}>")
            if key == "Fn::If":
                name, then, otherwise = arg
                return walk(then if condition(name) else otherwise)
            if key == "Condition":
                return condition(arg)
            if key == "Fn::Equals":
                left, right = (walk(v) for v in arg)
                return str(left) == str(right)
            if key == "Fn::Not":
                return not walk(arg[0])
            if key == "Fn::And":
                return all(walk(v) for v in arg)
            if key == "Fn::Or":
                return any(walk(v) for v in arg)
            if key == "Fn::Sub":
                if isinstance(arg, str):
                    return substitute(arg, {})
                text, names = arg
                return substitute(text, {k: walk(v) for k, v in names.items()})
            if key == "Fn::Join":
                separator, items = arg
                items = walk(items)
                if isinstance(items, str):  # a CommaDelimitedList parameter, passed as "a,b"
                    items = items.split(",") if items else []
                return separator.join(str(v) for v in items)
            if key == "Fn::Split":
                separator, text = arg
                return str(walk(text)).split(separator)
            if key == "Fn::Select":
                index, items = arg
                return walk(items)[int(walk(index))]
            if key == "Fn::FindInMap":
                mapping, top, second = (walk(v) for v in arg)
                return cfn["Mappings"][mapping][top][second]
            if key.startswith("Fn::"):
                raise ValueError(f"resolve: {key} is not supported")
        if isinstance(item, dict):
            walked = {k: walk(v) for k, v in item.items()}
            return {k: v for k, v in walked.items() if v is not _NO_VALUE}
        if isinstance(item, list):
            return [v for v in (walk(i) for i in item) if v is not _NO_VALUE]
        return item

    return walk


#: What a setting's ARN resolves to where the function's environment must parse.
SECRET_ARN = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT_ID}:secret:siglip-text-key-AbCdEf"


def function_environment(**parameters: str) -> dict[str, str]:
    """The served function's environment as a deploy with these parameters gives it."""
    cfn = translate(parameters)
    variables = cfn["Resources"][SERVED_FUNCTION]["Properties"]["Environment"]["Variables"]
    resolved = resolve(cfn, variables, parameters, refs={"ApiKeySecret": SECRET_ARN})
    return {name: str(value) for name, value in resolved.items()}


def create_only_properties(resource_type: str) -> set[str]:
    """Properties whose change replaces the resource (CloudFormation's registry schema, as
    bundled with cfn-lint): for AWS::Lambda::Version, a replacement publishes a new version."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(REGION, resource_type).schema
    return {pointer.rsplit("/", 1)[-1] for pointer in schema.get("createOnlyProperties", [])}


#: template-managed-instances.yaml's parameters whose empty default means "not given" (their
#: !If never passes them empty); cfn-lint checks the defaults against the ARN patterns anyway.
MANAGED_INSTANCES_OPTIONAL = frozenset(
    {
        "CapacityProviderArn",
        "CapacityProviderOperatorRoleArn",
        "CapacityProviderSubnetIds",
        "CapacityProviderSecurityGroupIds",
    }
)


#: What a gradual deploy adds (condition GradualDeploy), which SAM's CodeDeploy resources name.
GRADUAL_DEPLOY_ONLY = ("DeployHookFunction", "CodeDeployRole", "NewVersionErrorRateAlarm")


def lint_findings(cfn: dict[str, Any], path: Path = TEMPLATE) -> list[Any]:
    """cfn-lint's findings on a template translated from `path`, less those known moot.

    - W3011: SAM copies the function's UpdateReplacePolicy: Retain (there for its versions)
      to the role, alias and permissions it makes for it, whose create-only properties are
      constants: none of them is ever replaced.
    - W1030 on the `MANAGED_INSTANCES_OPTIONAL` parameters' empty defaults, and on the
      alarms' topic: an alarm exists only with a topic, cfn-lint checks its empty default.
    - W7001 for the TrafficShifting mapping: SAM resolves DeploymentPreference.Enabled's
      !FindInMap at transform time.
    - W1001 on the Refs to `GRADUAL_DEPLOY_ONLY`: they exist with GradualDeploy, the only
      case where SAM writes those Refs (into the deployment group and the alias's policy).
    - W1030 on the TracingConfig's Ref to the Tracing parameter, whose Disabled is no
      TracingConfig mode: SAM writes the TracingConfig only when the parameter is Active.
    """
    import json

    from cfnlint import api

    functions = {"SiglipTextFunction", "SiglipTextManagedFunction"}
    children = set(cfn["Resources"]) - set(source_template(path)["Resources"])
    return [
        m
        for m in api.lint(json.dumps(cfn), regions=["us-east-1"])
        if not (m.rule.id == "W3011" and m.path[:2][-1] in children | functions)
        and not (
            m.rule.id == "W1030"
            and m.path[:1] == ["Parameters"]
            and m.path[1] in MANAGED_INSTANCES_OPTIONAL
        )
        and not (m.rule.id == "W1030" and "'AlarmTopicArn'" in m.message)
        and not (m.rule.id == "W1030" and "{'Ref': 'Tracing'}" in m.message)
        and not (m.rule.id == "W7001" and "TrafficShifting" in m.message)
        and not (
            m.rule.id == "W1001" and any(f"'{name}'" in m.message for name in GRADUAL_DEPLOY_ONLY)
        )
    ]
