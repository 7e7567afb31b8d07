"""Asks the AWS SAM CLI's own code what it reads from samconfig.toml and template.yaml.

Run with the SAM CLI's Python (the SAM CLI pins its own click, so it lives in a virtual
environment of its own: .ci/run makes .sam-cli/), never imported by the tests: they call it
through `devkit.sam_build.samcli_probe`. One JSON request on stdin, one JSON answer
on stdout. Requests:

- ``{"op": "options", "dir": D, "command": "build", "env": "prod"}``: the options
  `sam <command> --config-env <env>` gets from D/samconfig.toml (env: default), resolved by
  the CLI's ConfigProvider in that command's click context;
- ``{"op": "guided", "dir": D, "answers": {...}}``: saves what `sam deploy --guided` saves
  (GuidedConfig) for every template parameter: the answer given, else the default guided
  offers (samconfig's value, else the template's);
- ``{"op": "built_for", "dir": D, "function": F}``: the architecture and build arguments
  `sam build` uses for function F (the CLI's stack and function providers);
- ``{"op": "parameters", "template": T}``: the parameters `sam deploy --guided` asks for;
- ``{"op": "document", "dir": D}``: samconfig.toml as the CLI reads it;
- ``{"op": "put", "dir": D, "command": C, "key": K, "value": V}``: SamConfig.put + flush;
- ``{"op": "deploy_values", "dir": D, "env": E}``: the parameters and tags `sam deploy
  --config-env E` passes to CloudFormation, as its own option types parse samconfig's lines.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

#: The SAM CLI's module of each command whose options samconfig.toml gives.
COMMANDS = {
    "build": "build.command",
    "deploy": "deploy.command",
    "local_invoke": "local.invoke.cli",
    "local_start_api": "local.start_api.cli",
    "local_start_lambda": "local.start_lambda.cli",
}


def options(directory: Path, command: str, env: str = "default") -> dict[str, Any]:
    import click
    from samcli.cli.cli_config_file import ConfigProvider

    cli = importlib.import_module(f"samcli.commands.{COMMANDS[command]}").cli
    with click.Context(cli, info_name=command):
        found: dict[str, Any] = ConfigProvider(section="parameters")(
            directory / "samconfig.toml", env, [command]
        )
    return found


def overrides(found: dict[str, Any]) -> dict[str, str]:
    import shlex

    pairs = (item.split("=", 1) for item in shlex.split(found.get("parameter_overrides", "")))
    return {key: value for key, value in pairs}


def parameters(template: Path) -> dict[str, Any]:
    from samcli.commands._utils.template import get_template_parameters

    found: dict[str, Any] = get_template_parameters(template_file=str(template))
    return found


def guided(directory: Path, answers: dict[str, str]) -> None:
    from samcli.commands.deploy.guided_config import GuidedConfig
    from samcli.lib.config.samconfig import SamConfig

    template = directory / "template.yaml"
    offered = overrides(options(directory, "deploy"))
    saved = {
        name: {
            "Value": answers.get(name, offered.get(name, str(spec.get("Default", "")))),
            "Hidden": False,
        }
        for name, spec in parameters(template).items()
    }
    config = SamConfig(str(directory))
    GuidedConfig(str(template), section="parameters")._save_parameter_overrides(
        ["deploy"], "default", saved, config
    )
    config.flush()


def built_for(directory: Path, function_id: str) -> dict[str, Any]:
    from samcli.lib.providers.sam_function_provider import SamFunctionProvider
    from samcli.lib.providers.sam_stack_provider import SamLocalStackProvider

    stacks, _ = SamLocalStackProvider.get_stacks(
        str(directory / "template.yaml"),
        parameter_overrides=overrides(options(directory, "build")),
    )
    function = SamFunctionProvider(stacks).get(function_id)
    assert function is not None, function_id
    return {
        "architectures": function.architectures,
        "build_args": dict((function.metadata or {}).get("DockerBuildArgs", {})),
    }


def main() -> None:
    request = json.load(sys.stdin)
    op = request["op"]
    directory = Path(request.get("dir", "."))
    answer: Any
    if op == "options":
        answer = options(directory, request["command"], request.get("env", "default"))
    elif op == "guided":
        guided(directory, request["answers"])
        answer = None
    elif op == "built_for":
        answer = built_for(directory, request["function"])
    elif op == "parameters":
        answer = parameters(Path(request["template"]))
    elif op == "document":
        from samcli.lib.config.samconfig import SamConfig

        # the file as written, read before any get_all (which merges a command's section into
        # the global one in memory): one SamConfig per question
        raw = json.loads(json.dumps(SamConfig(str(directory)).document, default=str))
        answer = {
            command: SamConfig(str(directory)).get_all([command], "parameters")
            for command in ("global", *COMMANDS)
        } | {"raw": raw}
    elif op == "deploy_values":
        from samcli.cli.types import CfnParameterOverridesType, CfnTags

        found = options(directory, "deploy", request.get("env", "default"))
        answer = {
            "parameters": CfnParameterOverridesType().convert(
                found.get("parameter_overrides", ""), None, None
            ),
            "tags": CfnTags().convert(found["tags"], None, None) if "tags" in found else None,
        }
    elif op == "put":
        from samcli.lib.config.samconfig import SamConfig

        config = SamConfig(str(directory))
        config.put([request["command"]], "parameters", request["key"], request["value"])
        config.flush()
        answer = None
    else:
        raise SystemExit(f"unknown op {op!r}")
    json.dump(answer, sys.stdout, default=str)


if __name__ == "__main__":
    main()
