"""`sam build` and `sam deploy` see one set of values, read by the SAM CLI's own code.

The SAM CLI reads samconfig.toml with `SamConfig.get_all`: a command's section
(`[default.build.parameters]`, `[default.deploy.parameters]`) over `[default.global.parameters]`
("AWS SAM CLI configuration file", configuration precedence). `sam deploy --guided` saves its
answers with `GuidedConfig`, as one `parameter_overrides` in `[default.deploy.parameters]`.
These tests write what a guided run leaves with that very code, then resolve what each command
gets: `sam build` through the SAM CLI's function provider (the architecture it builds for,
the build arguments), `sam deploy` through AWS's SAM translator with the parameters the
deploy section gives (the architecture the function runs on).
"""

from __future__ import annotations

import importlib
import re
import shutil
from pathlib import Path
from typing import Any

import click
import pytest

from tests.support.paths import ROOT
from tests.support.sam import resolve, translate

samconfig = pytest.importorskip(
    "samcli.lib.config.samconfig", reason="the SAM CLI (pip install aws-sam-cli; .ci/run does)"
)
from samcli.cli.cli_config_file import ConfigProvider  # noqa: E402
from samcli.commands._utils.template import get_template_parameters  # noqa: E402
from samcli.commands.deploy.guided_config import GuidedConfig  # noqa: E402
from samcli.lib.providers.sam_function_provider import SamFunctionProvider  # noqa: E402
from samcli.lib.providers.sam_stack_provider import SamLocalStackProvider  # noqa: E402

#: The SAM CLI's modules of the commands whose options samconfig.toml gives.
COMMANDS = {
    "build": "build.command",
    "deploy": "deploy.command",
    "local_invoke": "local.invoke.cli",
    "local_start_api": "local.start_api.cli",
}
TEMPLATE = ROOT / "template.yaml"
SAMCONFIG = ROOT / "samconfig.toml"
#: What a user answers to `sam deploy --guided` where it asks: the build-time choices that
#: went wrong before (an arm64 function on an x86_64 image), and a deploy-time one.
GUIDED_ANSWERS = {"Architecture": "arm64", "ModelDir": "layers/model-large", "MemorySize": "5307"}


def _command(name: str) -> click.Command:
    module = importlib.import_module(f"samcli.commands.{COMMANDS[name]}")
    command: click.Command = module.cli
    return command


def command_options(config_dir: Path, command: str) -> dict[str, Any]:
    """The options a `sam <command>` gets from samconfig.toml, as the CLI resolves them (in
    that command's click context, where the CLI's provider runs)."""
    provider = ConfigProvider(section="parameters")
    with click.Context(_command(command), info_name=command):
        options: dict[str, Any] = provider(config_dir / "samconfig.toml", "default", [command])
    return options


def parameter_overrides(options: dict[str, Any]) -> dict[str, str]:
    text = options.get("parameter_overrides", "")
    pairs = (item.split("=", 1) for item in text.split())
    return {key: value.strip('"') for key, value in pairs}


def guided_run(config_dir: Path) -> None:
    """What `sam deploy --guided` saves: every template parameter, at the default it offers
    (samconfig's value, else the template's), except where the user answered otherwise."""
    template_parameters = get_template_parameters(template_file=str(config_dir / "template.yaml"))
    offered = parameter_overrides(command_options(config_dir, "deploy"))
    answers = {
        name: {
            "Value": GUIDED_ANSWERS.get(name, offered.get(name, str(spec.get("Default", "")))),
            "Hidden": False,
        }
        for name, spec in template_parameters.items()
    }
    config = samconfig.SamConfig(str(config_dir))
    GuidedConfig(str(config_dir / "template.yaml"), section="parameters")._save_parameter_overrides(
        ["deploy"], "default", answers, config
    )
    config.flush()


def built_for(config_dir: Path) -> tuple[str, dict[str, Any]]:
    """What `sam build` builds the served function for: its architecture, build arguments."""
    overrides = parameter_overrides(command_options(config_dir, "build"))
    stacks, _ = SamLocalStackProvider.get_stacks(
        str(config_dir / "template.yaml"), parameter_overrides=overrides
    )
    function = SamFunctionProvider(stacks).get("SiglipTextFunction")
    assert function is not None
    (architecture,) = function.architectures or ["x86_64"]
    return architecture, dict(function.metadata.get("DockerBuildArgs", {}))


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
    deploy_overrides = parameter_overrides(command_options(project, "deploy"))
    assert deploy_overrides["MemorySize"] == "5307"
    # ... and `sam build` still builds for the architecture the function is deployed with
    assert built_for(project)[0] == deployed_on(project) == architecture


def test_guided_asks_for_nothing_the_build_decides() -> None:
    # the build-time choices are the template's Build mapping, not parameters: guided cannot
    # answer them differently for the deploy than the build read them
    asked = set(get_template_parameters(template_file=str(TEMPLATE)))
    assert not asked & {"Architecture", "ModelDir", "BaseImage"}
    # AND the build gets its base image from that mapping (pinned by digest)
    _, build_args = built_for(ROOT)
    assert "@sha256:" in build_args["BASE_IMAGE"]


def test_an_edit_where_samconfig_holds_the_parameters_reaches_the_deploy_after_guided(
    project: Path,
) -> None:
    # GIVEN the section where the repository's samconfig.toml keeps parameter_overrides (the
    # line a user edits) and a guided run's saved answers
    sections = samconfig.SamConfig(str(ROOT)).document["default"]
    (section,) = [
        name
        for name, tables in sections.items()
        if name in ("global", "deploy") and "parameter_overrides" in tables.get("parameters", {})
    ]
    guided_run(project)
    # WHEN MemorySize is edited on that line
    config = samconfig.SamConfig(str(project))
    line = config.document["default"][section]["parameters"]["parameter_overrides"]
    edited = re.sub(r'MemorySize="?\d+"?', "MemorySize=7076", line)
    assert edited != line
    config.put([section], "parameters", "parameter_overrides", edited)
    config.flush()
    # THEN `sam deploy` reads the edit (no other section shadows it)
    assert parameter_overrides(command_options(project, "deploy"))["MemorySize"] == "7076"


def test_samconfig_gives_the_build_no_parameters_and_the_deploy_only_template_ones() -> None:
    parameters = set(get_template_parameters(template_file=str(TEMPLATE)))
    # `sam build` needs none: what it reads is the template
    assert "parameter_overrides" not in command_options(ROOT, "build")
    # `sam deploy` and `sam local` name only parameters of the template
    for command in ("deploy", "local_invoke", "local_start_api"):
        named = set(parameter_overrides(command_options(ROOT, command)))
        assert named and named <= parameters, (command, named - parameters)
    # and the global section holds no parameter_overrides that a command's could shadow
    assert "parameter_overrides" not in samconfig.SamConfig(str(ROOT)).get_all(
        ["global"], "parameters"
    )
