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
from pathlib import Path
from typing import Any

import boto3
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator
from samtranslator.yaml_helper import yaml_parse

ROOT = Path(__file__).resolve().parents[2]
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
def _source(path: Path) -> dict[str, Any]:
    parsed: dict[str, Any] = yaml_parse(path.read_text())
    return parsed


def sam_template(path: Path = TEMPLATE, *, image: str | None = None) -> dict[str, Any]:
    """The template as `sam deploy` uploads it: every image function gets its `ImageUri`."""
    template = copy.deepcopy(_source(path))
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
    unknown = set(parameters or {}) - set(_source(path).get("Parameters", {}))
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
