"""docs/configuration.md agrees with the code: its variables are the fields of ``Settings``
with their defaults, and its parameters are template.yaml's with theirs."""

from __future__ import annotations

import re
from typing import Any

import pytest
from siglip_text.settings import ENV_PREFIX, Settings

from devkit.deployment import function_resource, load_template
from devkit.paths import ROOT
from devkit.readme import section, table_rows

CONFIGURATION = ROOT / "docs" / "configuration.md"
#: What a default cell holds for a setting without a default value (None).
NO_VALUE = "—"


def unquoted(cell: str) -> str:
    return cell.removeprefix("`").removesuffix("`")


def documented_default(cell: str, default: Any) -> bool:
    """Whether a table cell states ``default`` as the environment would spell it."""
    text = unquoted(cell)
    if default is None:  # derived or required: the cell says how, never a bare value
        return text == NO_VALUE or not re.fullmatch(r"[\w.-]+", text)
    if isinstance(default, bool):
        return text == str(default).lower()
    if isinstance(default, int | float):
        return re.fullmatch(r"[\d.]+", text) is not None and float(text) == default
    return text == str(default)


@pytest.fixture(scope="module")
def variable_rows() -> list[list[str]]:
    return table_rows(section(CONFIGURATION, "## Environment variables"))


@pytest.fixture(scope="module")
def parameter_rows() -> list[list[str]]:
    return table_rows(section(CONFIGURATION, "## Template parameters"))


def test_configuration_lists_every_setting_once_and_nothing_else(
    variable_rows: list[list[str]],
) -> None:
    # GIVEN the variables named in the table's first column
    named = [name for row in variable_rows for name in re.findall(r"`(\w+)`", row[0])]
    # THEN they are exactly the environment names of Settings' fields, each once
    fields = {ENV_PREFIX + field.upper() for field in Settings.model_fields}
    assert sorted(named) == sorted(fields)


def test_configuration_gives_each_settings_default(variable_rows: list[list[str]]) -> None:
    for row in variable_rows:
        for name in re.findall(r"`(\w+)`", row[0]):
            field = name.removeprefix(ENV_PREFIX).lower()
            default = Settings.model_fields[field].default
            assert documented_default(row[1], default), f"{name}: {row[1]!r} != {default!r}"


def test_configuration_lists_every_template_parameter_with_its_default(
    parameter_rows: list[list[str]],
) -> None:
    # GIVEN the template's parameters and the table's rows
    parameters = load_template()["Parameters"]
    documented = {unquoted(row[0]): row[1] for row in parameter_rows}
    # THEN the table names each parameter once, in the template's order, with its default
    assert [unquoted(row[0]) for row in parameter_rows] == list(parameters)
    for name, spec in parameters.items():
        default = str(spec["Default"])
        cell = documented[name]
        assert unquoted(cell) == (default or '""'), f"{name}: {cell!r} != {default!r}"


def test_each_parameter_row_names_the_variable_it_sets(
    parameter_rows: list[list[str]],
) -> None:
    # GIVEN the function's SIGLIP_ variables that take a parameter's value as they are
    environment = function_resource(load_template())["Properties"]["Environment"]["Variables"]
    set_by = {
        value["Ref"]: variable
        for variable, value in environment.items()
        if variable.startswith(ENV_PREFIX) and isinstance(value, dict) and "Ref" in value
    }
    assert set_by, "the template sets no SIGLIP_ variable from a parameter"
    meanings = {unquoted(row[0]): row[2] for row in parameter_rows}
    # THEN the parameter's row says which variable it sets
    for parameter, variable in set_by.items():
        assert f"`{variable}`" in meanings[parameter], parameter
