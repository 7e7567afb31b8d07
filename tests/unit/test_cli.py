"""The ``siglip-text`` command line (cli.py): which command an argument list chooses, and an
alias reaching the command it names. That only the chosen command's module is imported is
checked in a fresh interpreter by tests/docs/test_module_boundaries.py."""

from __future__ import annotations

import pytest
from siglip_text.cli import ALIASES, COMMANDS, build_parser, chosen_command


@pytest.mark.parametrize(
    ("argv", "chosen"),
    [
        (["serve", "--demo"], "serve"),
        (["bench", "--url", "http://127.0.0.1:1"], "load-test"),
        (["--version"], None),
        (["nonsense", "serve"], None),
        ([], None),
    ],
)
def test_the_first_command_named_is_the_one_chosen(argv: list[str], chosen: str | None) -> None:
    assert chosen_command(argv) == chosen


def test_every_alias_names_a_command() -> None:
    assert set(ALIASES.values()) <= set(COMMANDS)


def test_an_alias_parses_as_the_command_it_names() -> None:
    argv = ["bench", "--url", "http://127.0.0.1:1"]

    args = build_parser(argv).parse_args(argv)

    assert args._module.__name__ == COMMANDS["load-test"][0]
