"""`sam build` and `sam deploy` see one set of values, read by the SAM CLI's own code.

The SAM CLI reads samconfig.toml with `SamConfig.get_all`: a command's section
(`[default.build.parameters]`, `[default.deploy.parameters]`) over `[default.global.parameters]`
("AWS SAM CLI configuration file", configuration precedence). `sam deploy --guided` saves its
answers with `GuidedConfig`, as one `parameter_overrides` in `[default.deploy.parameters]`.
These tests write what a guided run leaves with that very code, then resolve what each command
gets: `sam build` through the SAM CLI's function provider (the architecture it builds for,
the build arguments), `sam deploy` through AWS's SAM translator with the parameters the
deploy section gives (the architecture the function runs on). The SAM CLI runs in its own
environment (it pins its own click): devkit/samcli_probe.py is its side.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
from siglip_text.tools.deploy_check import deploy_options, split_overrides

from devkit.paths import ROOT
from devkit.sam import resolve, translate
from devkit.sam_build import sam_python, samcli_probe

pytestmark = [
    pytest.mark.slow,
    pytest.mark.sam_cli,
]  # each test runs the SAM CLI in a process of its own

if sam_python() is None:
    if os.environ.get("CI") == "true":
        pytest.fail("no SAM CLI: .ci/run installs it in .sam-cli/", pytrace=False)
    pytest.skip(
        "no SAM CLI (python3 -m venv .sam-cli && .sam-cli/bin/pip install aws-sam-cli)",
        allow_module_level=True,
    )

TEMPLATE = ROOT / "template.yaml"
SAMCONFIG = ROOT / "samconfig.toml"
#: What a user answers to `sam deploy --guided` where it asks: the build-time choices that
#: went wrong before (an arm64 function on an x86_64 image), and a deploy-time one.
GUIDED_ANSWERS = {"Architecture": "arm64", "ModelDir": "layers/model-large", "MemorySize": "5307"}


def command_options(config_dir: Path, command: str, env: str = "default") -> dict[str, Any]:
    """The options a `sam <command> --config-env <env>` gets from samconfig.toml, as the
    CLI resolves them."""
    found: dict[str, Any] = samcli_probe(
        {"op": "options", "dir": str(config_dir), "command": command, "env": env}
    )
    return found


def parameter_overrides(options: dict[str, Any]) -> dict[str, str]:
    """The line as the SAM CLI splits it (a shell's rules: `Key=""` is an empty value)."""
    text = options.get("parameter_overrides", "")
    pairs = (item.split("=", 1) for item in shlex.split(text))
    return dict(pairs)


def guided_run(config_dir: Path) -> None:
    """What `sam deploy --guided` saves: every template parameter, at the default it offers,
    except where the user answered otherwise."""
    samcli_probe({"op": "guided", "dir": str(config_dir), "answers": GUIDED_ANSWERS})


def template_parameters(template: Path) -> set[str]:
    found: dict[str, Any] = samcli_probe({"op": "parameters", "template": str(template)})
    return set(found)


def built_for(config_dir: Path) -> tuple[str, dict[str, Any]]:
    """What `sam build` builds the served function for: its architecture, build arguments."""
    found: dict[str, Any] = samcli_probe(
        {"op": "built_for", "dir": str(config_dir), "function": "SiglipTextFunction"}
    )
    (architecture,) = found["architectures"] or ["x86_64"]
    return architecture, found["build_args"]


def deployed_on(config_dir: Path) -> str:
    """The architecture `sam deploy` gives the function: the translated template under the
    parameters samconfig passes to the deploy (a parameter the template lacks fails it)."""
    overrides = parameter_overrides(command_options(config_dir, "deploy"))
    cfn = translate(overrides)
    function = cfn["Resources"]["SiglipTextFunction"]
    (architecture,) = resolve(cfn, function["Properties"]["Architectures"], overrides)
    return str(architecture)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy2(TEMPLATE, tmp_path / "template.yaml")
    shutil.copy2(SAMCONFIG, tmp_path / "samconfig.toml")
    return tmp_path


def test_build_and_deploy_see_one_architecture_before_and_after_a_guided_run(
    project: Path,
) -> None:
    # GIVEN the repository's samconfig.toml: build and deploy agree
    architecture, _ = built_for(project)
    assert deployed_on(project) == architecture
    # WHEN `sam deploy --guided` saves its answers (arm64 wherever it asks for one)
    guided_run(project)
    # THEN the deploy reads the guided answers ...
    assert parameter_overrides(command_options(project, "deploy"))["MemorySize"] == "5307"
    # ... and `sam build` still builds for the architecture the function is deployed with
    assert built_for(project)[0] == deployed_on(project) == architecture


def test_guided_asks_for_nothing_the_build_decides() -> None:
    # the build-time choices are the template's Build mapping, not parameters: guided cannot
    # answer them differently for the deploy than the build read them
    asked = template_parameters(TEMPLATE)
    assert not asked & {"Architecture", "ModelDir", "BaseImage"}
    # AND the build gets its base image from that mapping (pinned by digest)
    _, build_args = built_for(ROOT)
    assert "@sha256:" in build_args["BASE_IMAGE"]


def test_an_edit_where_samconfig_holds_the_parameters_reaches_the_deploy_after_guided(
    project: Path,
) -> None:
    # GIVEN the section where the repository's samconfig.toml keeps parameter_overrides (the
    # line a user edits) and a guided run's saved answers
    document: dict[str, Any] = samcli_probe({"op": "document", "dir": str(ROOT)})
    sections = document["raw"]["default"]
    (section,) = [
        name
        for name, tables in sections.items()
        if name in ("global", "deploy") and "parameter_overrides" in tables.get("parameters", {})
    ]
    guided_run(project)
    # WHEN MemorySize is edited on that line
    document = samcli_probe({"op": "document", "dir": str(project)})
    line = document["raw"]["default"][section]["parameters"]["parameter_overrides"]
    edited = re.sub(r'MemorySize="?\d+"?', "MemorySize=7076", line)
    assert edited != line
    samcli_probe(
        {
            "op": "put",
            "dir": str(project),
            "command": section,
            "key": "parameter_overrides",
            "value": edited,
        }
    )
    # THEN `sam deploy` reads the edit (no other section shadows it)
    assert parameter_overrides(command_options(project, "deploy"))["MemorySize"] == "7076"


def test_samconfig_gives_the_build_no_parameters_and_the_deploy_only_template_ones() -> None:
    parameters = template_parameters(TEMPLATE)
    # `sam build` needs none: what it reads is the template
    assert "parameter_overrides" not in command_options(ROOT, "build")
    # `sam deploy` and `sam local` name only parameters of the template
    for command in ("deploy", "local_invoke", "local_start_api", "local_start_lambda"):
        named = set(parameter_overrides(command_options(ROOT, command)))
        assert named and named <= parameters, (command, named - parameters)
    # and the global section holds no parameter_overrides that a command's could shadow
    document: dict[str, Any] = samcli_probe({"op": "document", "dir": str(ROOT)})
    assert "parameter_overrides" not in document["global"]


def test_the_three_local_commands_run_without_a_key_on_ports_of_their_own() -> None:
    # (locally there is no Secrets Manager secret: sam local serves without a key)
    ports = set()
    for command in ("local_invoke", "local_start_api", "local_start_lambda"):
        options = command_options(ROOT, command)
        assert parameter_overrides(options)["AuthMode"] == "none", command
        if command != "local_invoke":
            ports.add(int(options["port"]))
            assert options["warm_containers"] == "LAZY"  # the model loads once per server
    assert len(ports) == 2


def test_the_prod_environment_is_a_stack_of_its_own_that_needs_an_alarm_topic() -> None:
    deploy = command_options(ROOT, "deploy", "prod")
    line = parameter_overrides(deploy)
    # what `sam deploy --config-env prod` passes, as the SAM CLI reads it
    assert deploy["stack_name"] != command_options(ROOT, "deploy")["stack_name"]
    assert line["TrafficShifting"] != "None" and line["WafRateLimitPerIp"] != "0"
    assert int(line["ReservedConcurrency"]) > 0 and line["ApiAccessLogs"] == "on"
    assert line["AlarmTopicArn"] == ""  # yours to give: a rule refuses the deploy without
    assert set(line) <= template_parameters(TEMPLATE)


def test_the_managed_instances_environment_builds_and_deploys_its_own_template() -> None:
    build = command_options(ROOT, "build", "managed-instances")
    assert build["template_file"] == "template-managed-instances.yaml"
    # `sam deploy` after `sam build` deploys the built template: no template_file for it
    deploy = command_options(ROOT, "deploy", "managed-instances")
    assert "template_file" not in deploy
    assert set(parameter_overrides(deploy)) <= template_parameters(
        ROOT / "template-managed-instances.yaml"
    )


# --- what each environment's deploy passes: check-deploy reads it as the SAM CLI does -------

DEPLOY_ENVS = ("default", "prod", "managed-instances")


@pytest.mark.parametrize("env", DEPLOY_ENVS)
def test_every_environment_tags_its_stack_from_its_one_tags_line(env: str) -> None:
    # GIVEN samconfig.toml's deploy section of the environment, read by the SAM CLI
    found: dict[str, Any] = samcli_probe({"op": "deploy_values", "dir": str(ROOT), "env": env})
    # THEN `sam deploy` tags the stack with the project and the environment, from which
    # CloudFormation tags the resources that take tags (docs/deploy.md, "Tags")
    assert found["tags"] is not None, f"[{env}.deploy.parameters] has no tags line"
    assert found["tags"]["project"] == "siglip-text"
    assert found["tags"]["environment"] == env


@pytest.mark.parametrize("env", DEPLOY_ENVS)
def test_check_deploy_reads_the_parameters_the_sam_cli_passes(env: str) -> None:
    # GIVEN what the SAM CLI's own option type makes of the environment's line
    found: dict[str, Any] = samcli_probe({"op": "deploy_values", "dir": str(ROOT), "env": env})
    # THEN `siglip-text check-deploy` checks exactly those values
    config = tomllib.loads(SAMCONFIG.read_text())
    ours = split_overrides(deploy_options(config, env).get("parameter_overrides", ""))
    assert ours == found["parameters"]
