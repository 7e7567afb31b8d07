"""template.yaml through AWS's own SAM translator, as `sam deploy` has CloudFormation run it.

`sam build` fills in the function's `ImageUri` (the image it built) and `sam deploy` replaces it
with the pushed ECR image; CloudFormation then runs the `AWS::Serverless-2016-10-31` transform
(aws-sam-translator) with the stack's parameter values, defaults filled in for the rest. This
module does the same with the installed aws-sam-translator, offline: the result is the plain
CloudFormation template the stack would be created or updated from.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import re
from pathlib import Path
from typing import Any

import boto3
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator
from samtranslator.yaml_helper import yaml_parse

from devkit.deployment import evaluate_conditions, parameter_defaults

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


def sam_template(path: Path = TEMPLATE, *, image: str | None = None) -> dict[str, Any]:
    """The template as `sam deploy` uploads it: every image function gets its `ImageUri`."""
    template = copy.deepcopy(source_template(path))
    for resource in template.get("Resources", {}).values():
        properties = resource.get("Properties") or {}
        if (
            resource.get("Type") == "AWS::Serverless::Function"
            and properties.get("PackageType") == "Image"
        ):
            properties["ImageUri"] = image or image_uri()
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


# --- What CloudFormation makes of the translated template ---------------------------------


def _ref_placeholder(logical_id: str) -> str:
    """A stand-in for what only CloudFormation knows: a resource's Ref."""
    return f"<Ref {logical_id}>"


_NO_VALUE = object()


def parameter_values(
    cfn: dict[str, Any], parameters: dict[str, str] | None = None
) -> dict[str, str]:
    """Every parameter as CloudFormation passes it (a string), and the pseudo parameters."""
    values = parameter_defaults(cfn, **(parameters or {}))
    values.update({"AWS::AccountId": ACCOUNT_ID, "AWS::Region": REGION, "AWS::Partition": "aws"})
    values.setdefault("AWS::StackName", "siglip-text")
    values.setdefault("AWS::URLSuffix", "amazonaws.com")
    return values


def resolve(cfn: dict[str, Any], value: Any, parameters: dict[str, str] | None = None) -> Any:
    """`value` with parameters, conditions and the intrinsic functions of the template resolved.

    A resource's Ref and attributes become placeholders that name the resource, so that a value
    changes exactly when what CloudFormation would put there can change.
    """
    values = parameter_values(cfn, parameters)
    conditions = evaluate_conditions(cfn, values)

    def condition(name: str) -> bool:
        return conditions[name]

    def substitute(text: str, names: dict[str, Any]) -> str:
        def one(match: Any) -> str:
            name: str = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in names:
                return str(names[name])
            if name in values:
                return values[name]
            return _ref_placeholder(name)

        return re.sub(r"\$\{([^}]+)\}", one, text)

    def walk(item: Any) -> Any:  # noqa: PLR0911, PLR0912
        if isinstance(item, dict) and len(item) == 1:
            ((key, arg),) = item.items()
            if key == "Ref":
                if arg == "AWS::NoValue":
                    return _NO_VALUE
                return values[arg] if arg in values else _ref_placeholder(arg)
            if key == "Fn::GetAtt":
                target = arg if isinstance(arg, str) else ".".join(arg)
                return f"<GetAtt {target}>"
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
                return separator.join(str(v) for v in walk(items))
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

    return walk(value)


def create_only_properties(resource_type: str) -> set[str]:
    """Properties whose change replaces the resource (CloudFormation's registry schema, as
    bundled with cfn-lint): for AWS::Lambda::Version, a replacement publishes a new version."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(REGION, resource_type).schema
    return {pointer.rsplit("/", 1)[-1] for pointer in schema.get("createOnlyProperties", [])}


#: Compute=managed-instances parameters whose empty default means "not given" (their !If
#: never passes them empty); cfn-lint checks the defaults against the ARN patterns anyway.
MANAGED_INSTANCES_OPTIONAL = frozenset(
    {
        "CapacityProviderArn",
        "CapacityProviderOperatorRoleArn",
        "CapacityProviderSubnetIds",
        "CapacityProviderSecurityGroupIds",
    }
)


def lint_findings(cfn: dict[str, Any]) -> list[Any]:
    """cfn-lint's findings on a translated template, less the two that are known moot.

    - W3011: SAM copies the function's UpdateReplacePolicy: Retain (there for its versions)
      to the role, alias and permissions it makes for it, whose create-only properties are
      constants: none of them is ever replaced.
    - W1030 on the `MANAGED_INSTANCES_OPTIONAL` parameters' empty defaults.
    - W7001 for the TrafficShifting mapping: SAM resolves DeploymentPreference.Enabled's
      !FindInMap at transform time.
    - W1001 on the Ref to DeployHookFunction: the hook exists with GradualDeploy, the only
      case where SAM writes that Ref.
    """
    import json

    from cfnlint import api

    functions = {"SiglipTextFunction", "SiglipTextManagedFunction"}
    children = set(cfn["Resources"]) - set(source_template()["Resources"])
    return [
        m
        for m in api.lint(json.dumps(cfn), regions=["us-east-1"])
        if not (m.rule.id == "W3011" and m.path[:2][-1] in children | functions)
        and not (
            m.rule.id == "W1030"
            and m.path[:1] == ["Parameters"]
            and m.path[1] in MANAGED_INSTANCES_OPTIONAL
        )
        and not (m.rule.id == "W7001" and "TrafficShifting" in m.message)
        and not (m.rule.id == "W1001" and "'DeployHookFunction'" in m.message)
    ]
