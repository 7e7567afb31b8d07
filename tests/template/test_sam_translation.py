"""template.yaml through AWS's own SAM translator, as CloudFormation runs it on `sam deploy`.

The source template only says what SAM should make; these tests read what it makes: the API's
routes and gateway responses, the `live` alias, the function's concurrency, and above all which
deploys publish a new `AWS::Lambda::Version`, since the API invokes `live` and `live` follows
only a newly published version. A deploy that changes what the function does but publishes no
version leaves the API on the old configuration (an unauthenticated `live` after
AuthMode=none -> api-key, a `live` reading a deleted secret after api-key -> none).
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import pytest

pytest.importorskip("samtranslator", reason="aws-sam-translator is in the test extra")

from devkit.deployment import samconfig_parameters  # noqa: E402
from devkit.sam import (  # noqa: E402
    create_only_properties,
    image_uri,
    lint_findings,
    resolve,
    resources_of_type,
    source_template,
    translate,
)

#: Function properties that are not part of a published version: Lambda applies them to the
#: function as a whole, every version at once (reserved concurrency, tags).
UNVERSIONED = {"ReservedConcurrentExecutions", "Tags"}
#: Valid values other than the default where the generic choice would not be valid.
OTHER_VALUES = {
    "IndexFingerprint": "sha256:" + "0123456789abcdef" * 4,
    "WafRateLimitPerIp": "2000",
    "ApiThrottle": "10/20",
    "PermissionsBoundary": "arn:aws:iam::123456789012:policy/team-boundary",
}
#: The Description of a Lambda version: at most 256 characters (CloudFormation's schema).
VERSION_DESCRIPTION_MAX = 256


def _source_template() -> dict[str, Any]:
    return source_template()


def _parameters() -> dict[str, dict[str, Any]]:
    params: dict[str, dict[str, Any]] = _source_template()["Parameters"]
    return params


def _other_value(name: str) -> str:
    """A valid value of parameter `name` other than its default."""
    if name in OTHER_VALUES:
        return OTHER_VALUES[name]
    spec = _parameters()[name]
    default = str(spec.get("Default", ""))
    if "AllowedValues" in spec:
        return next(str(v) for v in spec["AllowedValues"] if str(v) != default)
    if spec["Type"] == "Number":
        number = int(default) + 1
        if "MaxValue" in spec and number > int(spec["MaxValue"]):
            number = int(default) - 1
        return str(number)
    value = f"{default}b" if default else "arn:aws:sns:us-east-1:123456789012:alerts"
    if not default and "AllowedPattern" in spec and not re.fullmatch(spec["AllowedPattern"], value):
        value = "b"  # e.g. a path
    if "AllowedPattern" in spec:
        assert re.fullmatch(spec["AllowedPattern"], value), (name, value)
    return value


def _image_for(parameters: dict[str, str]) -> str:
    """The ImageUri `sam build` + `sam deploy` would produce: the image depends on its build
    arguments and platform (the Dockerfile and context are the same in every case here)."""
    function = _source_template()["Resources"]["SiglipTextFunction"]
    build_inputs = {
        "args": resolve(
            _source_template(), function["Metadata"].get("DockerBuildArgs", {}), parameters
        ),
        "platform": resolve(
            _source_template(), function["Properties"]["Architectures"], parameters
        ),
    }
    return image_uri(json.dumps(build_inputs, sort_keys=True))


@cache
def _deployed(items: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    parameters = dict(items)
    return translate(parameters, image=_image_for(parameters))


def deployed(**parameters: str) -> dict[str, Any]:
    """The translated template of a deploy with these parameter overrides (the image built
    from them)."""
    return _deployed(tuple(sorted(parameters.items())))


def _per_request(cfn: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """The resources of a type that the template makes (Managed Instances have a template of
    their own: tests/template/test_template_managed_instances.py)."""
    return resources_of_type(cfn, resource_type)


def _function(cfn: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    # the function that serves (the other one, the deploy hook, publishes no version)
    return "SiglipTextFunction", resources_of_type(cfn, "AWS::Lambda::Function")[
        "SiglipTextFunction"
    ]


def versioned_configuration(cfn: dict[str, Any], parameters: dict[str, str]) -> dict[str, Any]:
    """What a published version of the function snapshots: code and configuration, resolved."""
    _, function = _function(cfn)
    properties = {k: v for k, v in function["Properties"].items() if k not in UNVERSIONED}
    resolved: dict[str, Any] = resolve(cfn, properties, parameters)
    return resolved


def published_version(
    cfn: dict[str, Any], parameters: dict[str, str]
) -> tuple[str, dict[str, Any]]:
    """The version resource: its logical id and its create-only properties, resolved.

    CloudFormation creates a new version (Lambda's PublishVersion) when the logical id is new,
    or when a create-only property changes (a replacement)."""
    ((logical_id, version),) = _per_request(cfn, "AWS::Lambda::Version").items()
    create_only = create_only_properties("AWS::Lambda::Version")
    properties = {k: v for k, v in version.get("Properties", {}).items() if k in create_only}
    return logical_id, resolve(cfn, properties, parameters)


def _change(
    cfn_before: dict[str, Any],
    before: dict[str, str],
    cfn_after: dict[str, Any],
    after: dict[str, str],
) -> tuple[bool, bool]:
    config_changed = versioned_configuration(cfn_before, before) != versioned_configuration(
        cfn_after, after
    )
    new_version = published_version(cfn_before, before) != published_version(cfn_after, after)
    return config_changed, new_version


# --- which deploys publish a version ----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(_parameters()))
def test_a_deploy_publishes_a_new_version_exactly_when_the_function_changes(name: str) -> None:
    # GIVEN a stack deployed with the defaults, WHEN one parameter changes
    value = _other_value(name)
    before, after = deployed(), deployed(**{name: value})
    # THEN a new version (and so a new `live`) exactly when what a version snapshots changes
    config_changed, new_version = _change(before, {}, after, {name: value})
    if config_changed:
        assert new_version, (
            f"{name}={value} changes the function but publishes no new version: "
            f"the 'live' alias (what the API invokes) keeps the old configuration"
        )
    else:
        assert not new_version, (
            f"{name}={value} does not change the function, yet publishes a version"
        )


@pytest.mark.parametrize(("before", "after"), [("none", "api-key"), ("api-key", "none")])
def test_switching_auth_mode_with_the_same_image_moves_live_to_a_new_version(
    before: str, after: str
) -> None:
    # GIVEN the same image, WHEN only AuthMode changes
    first, second = deployed(AuthMode=before), deployed(AuthMode=after)
    assert _function(first)[1]["Properties"]["Code"] == _function(second)[1]["Properties"]["Code"]
    # THEN the version is new, and `live` points at it
    old, new = (
        published_version(first, {"AuthMode": before}),
        published_version(second, {"AuthMode": after}),
    )
    assert old != new, "AuthMode changed but the stack publishes the same version"
    (alias,) = _per_request(second, "AWS::Lambda::Alias").values()
    assert alias["Properties"]["FunctionVersion"] == {"Fn::GetAtt": [new[0], "Version"]}


def test_an_unchanged_stack_publishes_no_version() -> None:
    assert published_version(deployed(), {}) == published_version(
        translate(image=_image_for({})), {}
    )


def test_a_new_image_alone_publishes_a_new_version() -> None:
    same = translate(image=image_uri("one")), translate(image=image_uri("two"))
    assert published_version(same[0], {})[0] != published_version(same[1], {})[0]


def test_old_versions_survive_a_deploy_so_live_can_be_rolled_back() -> None:
    (version,) = _per_request(deployed(), "AWS::Lambda::Version").values()
    assert version.get("DeletionPolicy") == "Retain"  # a new logical id: the old one stays
    assert version.get("UpdateReplacePolicy") == "Retain"  # a replacement: the old one stays


def test_version_description_fits_lambdas_limit_with_the_longest_values() -> None:
    longest: dict[str, str] = {}
    for name, spec in _parameters().items():
        if "AllowedValues" in spec:
            longest[name] = max((str(v) for v in spec["AllowedValues"]), key=len)
        elif spec["Type"] == "Number" and "MaxValue" in spec:
            longest[name] = str(spec["MaxValue"])
        elif spec["Type"] == "Number":
            longest[name] = str(2**31 - 1)
    cfn = translate(longest)
    _, properties = published_version(cfn, longest)
    assert len(properties.get("Description", "")) <= VERSION_DESCRIPTION_MAX


# --- what the API, the alias and the concurrency become ---------------------------------------


def _openapi(cfn: dict[str, Any]) -> dict[str, Any]:
    (api,) = resources_of_type(cfn, "AWS::ApiGateway::RestApi").values()
    body: dict[str, Any] = api["Properties"]["Body"]
    return body


def test_the_api_serves_the_functions_routes_through_the_live_alias() -> None:
    cfn = deployed()
    # the routes are declared in the API's definition (Frontend=rest-api), not as Events
    source = _source_template()["Resources"]["SiglipTextApi"]["Properties"]["DefinitionBody"]
    expected = {(path, method) for path, methods in source["paths"].items() for method in methods}
    paths = _openapi(cfn)["paths"]
    assert {(path, method) for path, methods in paths.items() for method in methods} == expected
    ((_, alias),) = _per_request(cfn, "AWS::Lambda::Alias").items()
    assert alias["Properties"]["Name"] == "live"
    for methods in paths.values():
        for operation in methods.values():
            uri = resolve(cfn, operation["x-amazon-apigateway-integration"]["uri"])
            # the alias by its ARN (the function's name, the alias's), never $LATEST
            assert uri.endswith(":function:<Ref SiglipTextFunction>:live/invocations"), uri


def test_gateway_errors_are_remapped_stage_throttling_429_and_failed_invokes_503() -> None:
    responses = _openapi(deployed())["x-amazon-apigateway-gateway-responses"]
    assert responses["THROTTLED"]["statusCode"] == "429"
    assert (
        responses["THROTTLED"]["responseParameters"]["gatewayresponse.header.Retry-After"] == "'1'"
    )
    # any failure to invoke (a throttle, or a function that cannot run): retryable, no
    # claim of capacity (tests/template/test_template_production.py)
    assert responses["INTEGRATION_FAILURE"]["statusCode"] == "503"
    for response in responses.values():
        template = response["responseTemplates"]["application/json"]
        # a bare $context value is JSON once substituted (API Gateway quotes messageString)
        error = json.loads(re.sub(r"(?<=: )\$context\.[A-Za-z.]+", '"x"', template))
        assert set(error["error"]) == {"message", "type", "param", "code"}


def test_reserved_concurrency_is_off_by_default_and_set_when_asked() -> None:
    _, default = _function(deployed())
    assert "ReservedConcurrentExecutions" not in resolve(deployed(), default["Properties"], {})
    reserved_stack = deployed(ReservedConcurrency="5")
    _, reserved = _function(reserved_stack)
    properties = resolve(reserved_stack, reserved["Properties"], {"ReservedConcurrency": "5"})
    assert properties["ReservedConcurrentExecutions"] == "5"


@pytest.mark.slow
def test_translated_template_passes_cfn_lint() -> None:
    pytest.importorskip("cfnlint.api", reason="cfn-lint is in the test extra")
    other = {"AuthMode": "none", "ReservedConcurrency": "2", "SnapStart": "PublishedVersions"}
    url = {"Frontend": "function-url", "ReservedConcurrency": "2"}
    signed = {"Frontend": "function-url", "AuthMode": "iam"}
    production = {
        **samconfig_parameters("prod"),
        "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:alarms",
        "IndexFingerprint": "sha256:" + "0" * 64,
    }
    options = {
        **production,
        "ApiAccessLogs": "on+execution",
        "Tracing": "Active",
        "PermissionsBoundary": "arn:aws:iam::123456789012:policy/team-boundary",
        "ApiThrottle": "200/20",
    }
    for parameters in ({}, other, url, signed, production, options):
        cfn = deployed(**parameters)
        rest = lint_findings(cfn)
        assert rest == [], "\n".join(str(m) for m in rest)
