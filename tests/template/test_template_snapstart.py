"""The SnapStart parameter, through AWS's own SAM translator: what the function gets, and
that it has nothing Lambda refuses beside SnapStart (docs/snapstart.md: provisioned
concurrency, EFS, ephemeral storage over 512 MB).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("samtranslator", reason="aws-sam-translator is in the test extra")

from devkit.deployment import load_template  # noqa: E402
from devkit.rules import refusals  # noqa: E402
from devkit.sam import (  # noqa: E402
    lint_findings,
    parameter_defaults,
    resolve,
    resources_of_type,
    translate,
)

#: Lambda's largest ephemeral storage (/tmp) with SnapStart, in MB.
SNAPSTART_MAX_EPHEMERAL_MB = 512


def function(cfn: dict[str, Any], **parameters: str) -> dict[str, Any]:
    resource = resources_of_type(cfn, "AWS::Lambda::Function")["SiglipTextFunction"]
    properties: dict[str, Any] = resolve(cfn, resource["Properties"], parameters)
    return properties


def of_function(cfn: dict[str, Any], resource_type: str) -> tuple[str, dict[str, Any]]:
    """The one resource of this type that SAM made for SiglipTextFunction (the per-request
    function; Compute=managed-instances has its own)."""
    ((logical_id, resource),) = (
        (name, resource)
        for name, resource in resources_of_type(cfn, resource_type).items()
        if resource["Properties"].get("FunctionName") == {"Ref": "SiglipTextFunction"}
    )
    return logical_id, resource


def refused_by_rules(cfn: dict[str, Any], **parameters: str) -> list[str]:
    """The rules of the translated template that refuse these parameters."""
    return list(refusals(cfn, parameter_defaults(load_template(), **parameters)))


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
    _, alias = of_function(on, "AWS::Lambda::Alias")
    assert alias["Properties"]["Name"] == "live"


def test_turning_snapstart_on_publishes_a_new_version() -> None:
    def version(**parameters: str) -> tuple[str, str]:
        cfn = translate(parameters)
        logical_id, resource = of_function(cfn, "AWS::Lambda::Version")
        return logical_id, json.dumps(resolve(cfn, resource["Properties"], parameters))

    assert version() != version(SnapStart="PublishedVersions")


def test_with_snapstart_the_function_has_no_efs_and_at_most_512_mb_of_ephemeral_storage() -> None:
    properties = function(
        translate({"SnapStart": "PublishedVersions"}), SnapStart="PublishedVersions"
    )
    assert not properties.get("FileSystemConfigs")
    size = (properties.get("EphemeralStorage") or {}).get("Size", SNAPSTART_MAX_EPHEMERAL_MB)
    assert int(size) <= SNAPSTART_MAX_EPHEMERAL_MB


def test_provisioned_concurrency_which_snapstart_excludes_is_not_offered() -> None:
    # (Lambda refuses SnapStart with provisioned concurrency: the template has none to set)
    cfn = translate({"SnapStart": "PublishedVersions"})
    _, alias = of_function(cfn, "AWS::Lambda::Alias")
    assert "ProvisionedConcurrencyConfig" not in alias["Properties"]
    assert "ProvisionedConcurrency" not in load_template()["Parameters"]
    assert refused_by_rules(cfn, SnapStart="PublishedVersions") == []


@pytest.mark.slow
def test_the_translated_template_with_snapstart_passes_cfn_lint() -> None:
    pytest.importorskip("cfnlint.api", reason="cfn-lint is in the test extra")
    cfn = translate({"SnapStart": "PublishedVersions"})
    rest = lint_findings(cfn)
    assert rest == [], "\n".join(str(m) for m in rest)
