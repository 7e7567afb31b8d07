"""docs/managed-instances.md and docs/deploy.md agree with the templates and samconfig.toml:
the Managed Instances parameters tabled with their defaults, set on the one line of their
environment (never a command-line list that replaces it), and the commands of each
environment the ones samconfig.toml defines."""

from __future__ import annotations

import re
import shlex
import tomllib

from devkit.deployment import MANAGED_INSTANCES_TEMPLATE, load_template
from devkit.paths import ROOT
from devkit.readme import section, table_rows
from devkit.sam import parameter_defaults

MANAGED = ROOT / "docs" / "managed-instances.md"
DEPLOY = ROOT / "docs" / "deploy.md"


def unquoted(cell: str) -> str:
    return cell.removeprefix("`").removesuffix("`")


def test_managed_instances_md_tables_every_parameter_of_its_template_with_its_default() -> None:
    rows = table_rows(section(MANAGED, "## Deploy").split("The parameters, each described", 1)[1])
    parameters = load_template(MANAGED_INSTANCES_TEMPLATE)["Parameters"]
    assert [unquoted(row[0]) for row in rows] == list(parameters)
    for row in rows:
        default = str(parameters[unquoted(row[0])]["Default"])
        assert unquoted(row[1]) == (default or '""'), row


def test_managed_instances_md_sets_parameters_on_its_environments_one_line() -> None:
    text = section(MANAGED, "## Deploy")
    # GIVEN the samconfig section the page shows, and the commands it runs
    example = re.search(r"```toml\n(.*?)```", text, re.DOTALL)
    assert example
    shown = tomllib.loads(example[1])["managed-instances"]["deploy"]["parameters"]
    pairs = dict(item.split("=", 1) for item in shlex.split(shown["parameter_overrides"]))
    # THEN it names only the template's parameters, in the section samconfig.toml has
    parameter_defaults(load_template(MANAGED_INSTANCES_TEMPLATE), **pairs)
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    assert "parameter_overrides" in config["managed-instances"]["deploy"]["parameters"]
    commands = re.search(r"```bash\n(.*?)```", text, re.DOTALL)
    assert commands
    lines = [line.split("#")[0].strip() for line in commands[1].splitlines() if line.strip()]
    assert lines == [
        "sam build --config-env managed-instances",
        "sam deploy --config-env managed-instances",
    ]
    # AND no command of the page passes a list that would replace the line
    for block in re.findall(r"```bash\n(.*?)```", MANAGED.read_text(), re.DOTALL):
        assert "--parameter-overrides" not in block


def test_deploy_md_names_each_environments_commands_and_stack() -> None:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    environments = {name for name, value in config.items() if isinstance(value, dict)}
    rows = table_rows(section(DEPLOY, "## Environments: one parameter line each"))
    assert {unquoted(row[0]) for row in rows} == environments
    for row in rows:
        env = unquoted(row[0])
        stack = config[env]["global"]["parameters"]["stack_name"]
        assert unquoted(row[2]) == stack, row
        flag = "" if env == "default" else f" --config-env {env}"
        assert f"sam build{flag}" in row[1] and f"sam deploy{flag}" in row[1], row
