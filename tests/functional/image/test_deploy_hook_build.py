"""`sam build` of the pre-traffic hook alone, with the real SAM CLI: the template's makefile
build copies the one module, needs no Python of the hook's runtime and prints no warning."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from devkit.paths import ROOT
from devkit.sam_build import sam_executable

pytestmark = [pytest.mark.slow, pytest.mark.sam_cli]


class _CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags read as plain values."""


_CfnLoader.add_multi_constructor(
    "!",
    lambda loader, suffix, node: (
        loader.construct_sequence(node)
        if isinstance(node, yaml.SequenceNode)
        else loader.construct_mapping(node)
        if isinstance(node, yaml.MappingNode)
        else loader.construct_scalar(node)
    ),
)


def test_sam_build_copies_the_hook_without_a_warning_or_a_python_of_its_runtime(
    tmp_path: Path,
) -> None:
    sam = sam_executable()
    if sam is None:
        pytest.skip("no SAM CLI: pip install aws-sam-cli (.ci/run installs it in .sam-cli/)")
    # GIVEN the template's hook function, as it stands, in a project of its own
    resource = yaml.load((ROOT / "template.yaml").read_text(), _CfnLoader)["Resources"][
        "DeployHookFunction"
    ]
    shutil.copytree(
        ROOT / "handler" / "deploy_hook",
        tmp_path / "handler" / "deploy_hook",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    function = {
        "Type": "AWS::Serverless::Function",
        "Properties": {
            key: resource["Properties"][key]
            for key in ("CodeUri", "Handler", "Runtime", "Architectures")
        },
        "Metadata": resource["Metadata"],
    }
    template = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Transform": "AWS::Serverless-2016-10-31",
        "Resources": {"DeployHookFunction": function},
    }
    (tmp_path / "template.yaml").write_text(yaml.safe_dump(template))

    # WHEN sam build runs (this machine has no python3.13: SAM's Python builder would fail)
    done = subprocess.run(
        [sam, "build"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SAM_CLI_TELEMETRY": "0"},
    )

    # THEN it builds, says nothing of a requirements file, and the zip is the one module
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "requirements.txt" not in output
    built = tmp_path / ".aws-sam" / "build" / "DeployHookFunction"
    assert sorted(p.name for p in built.iterdir()) == ["pre_traffic.py"]
