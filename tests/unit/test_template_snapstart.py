"""The SnapStart parameter, through AWS's own SAM translator: what the function gets, and the
template's rules refusing what Lambda refuses beside SnapStart (docs/snapstart.md: provisioned
concurrency, EFS, ephemeral storage over 512 MB), evaluated on the translated template as
CloudFormation evaluates them before creating anything.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("samtranslator", reason="aws-sam-translator is in the test extra")

from tests.support.deployment import evaluate_conditions, load_template, parameter_defaults  # noqa: E402
from tests.support.sam import resolve, resources_of_type, translate  # noqa: E402

#: Lambda's largest ephemeral storage (/tmp) with SnapStart, in MB.
SNAPSTART_MAX_EPHEMERAL_MB = 512


def function(cfn: dict[str, Any], **parameters: str) -> dict[str, Any]:
    ((_, resource),) = resources_of_type(cfn, "AWS::Lambda::Function").items()
    properties: dict[str, Any] = resolve(cfn, resource["Properties"], parameters)
    return properties


def refused_by_rules(cfn: dict[str, Any], **parameters: str) -> list[str]:
    """The rules of the translated template whose assertion fails for these parameters."""
    params = parameter_defaults(load_template(), **parameters)
    refused = []
    for name, rule in cfn.get("Rules", {}).items():
        for assertion in rule["Assertions"]:
            checks = {"Conditions": {"applies": rule.get("RuleCondition", True)}}
            checks["Conditions"]["holds"] = assertion["Assert"]
            verdict = evaluate_conditions(checks, params)
            if verdict["applies"] and not verdict["holds"]:
                refused.append(name)
    return refused


def test_snapstart_is_off_by_default_and_on_published_versions_when_asked() -> None:
    off = translate()
    assert "SnapStart" not in function(off)
    on = translate({"SnapStart": "PublishedVersions"})
    assert function(on, SnapStart="PublishedVersions")["SnapStart"] == {
        "ApplyOn": "PublishedVersions"
    }
    # SnapStart applies to published versions only: the API invokes the "live" alias, which
    # points at a published version
    assert resources_of_type(on, "AWS::Lambda::Version")
    (alias,) = resources_of_type(on, "AWS::Lambda::Alias").values()
    assert alias["Properties"]["Name"] == "live"


def test_turning_snapstart_on_publishes_a_new_version() -> None:
    def version(**parameters: str) -> tuple[str, str]:
        cfn = translate(parameters)
        ((logical_id, resource),) = resources_of_type(cfn, "AWS::Lambda::Version").items()
        return logical_id, json.dumps(resolve(cfn, resource["Properties"], parameters))

    assert version() != version(SnapStart="PublishedVersions")


def test_with_snapstart_the_function_has_no_efs_and_at_most_512_mb_of_ephemeral_storage() -> None:
    properties = function(
        translate({"SnapStart": "PublishedVersions"}), SnapStart="PublishedVersions"
    )
    assert not properties.get("FileSystemConfigs")
    size = (properties.get("EphemeralStorage") or {}).get("Size", SNAPSTART_MAX_EPHEMERAL_MB)
    assert int(size) <= SNAPSTART_MAX_EPHEMERAL_MB


def test_the_rules_refuse_snapstart_with_provisioned_concurrency() -> None:
    cfn = translate({"SnapStart": "PublishedVersions"})
    rule = "SnapStartWithoutProvisionedConcurrency"
    assert rule in cfn["Rules"]  # the translator keeps the rules for CloudFormation
    assert rule in refused_by_rules(cfn, SnapStart="PublishedVersions", ProvisionedConcurrency="2")
    assert rule not in refused_by_rules(cfn, SnapStart="PublishedVersions")
    assert rule not in refused_by_rules(cfn, ProvisionedConcurrency="2")
    assert refused_by_rules(cfn) == []


@pytest.mark.slow
def test_the_translated_template_with_snapstart_passes_cfn_lint() -> None:
    api = pytest.importorskip("cfnlint.api", reason="cfn-lint is in the test extra")
    cfn = translate({"SnapStart": "PublishedVersions"})
    matches = api.lint(json.dumps(cfn), regions=["us-east-1"])
    # W3011 (the function's UpdateReplacePolicy copied by SAM to what it makes) is the same
    # with or without SnapStart: test_sam_translation.py accounts for it.
    rest = [m for m in matches if m.rule.id != "W3011"]
    assert rest == [], "\n".join(str(m) for m in rest)
