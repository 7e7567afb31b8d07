"""Issue 48's small ones: "Try it" installs what its snippet imports, `serve` without a
model names --demo and --model-dir, and the repository has the LICENSE pyproject names.
(The pre-traffic hook's quiet `sam build`: tests/functional/test_deploy_hook_build.py.)"""

from __future__ import annotations

import ast
import os
import re
import tomllib

import pytest
from packaging.requirements import Requirement
from siglip_text.cli import main

from devkit.paths import ROOT

#: import name -> distribution name, where they differ
DISTRIBUTIONS = {"yaml": "pyyaml"}


def _section(text: str, title: str) -> str:
    return text.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def test_try_it_installs_every_package_its_snippets_import() -> None:
    # GIVEN README's "Try it" section: its install line and its Python snippets
    section = _section((ROOT / "README.md").read_text(), "Try it")
    [extras] = re.findall(r"pip install -e '\.\[([a-z,]+)\]'", section)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installed = {Requirement(r).name for r in project["dependencies"]}
    for extra in extras.split(","):
        installed |= {Requirement(r).name for r in project["optional-dependencies"][extra]}
    imported = set()
    for block in re.findall(r"```python\n(.*?)```", section, flags=re.S):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])

    # THEN each third-party import is installed by that line
    third_party = {name for name in imported if name not in {"json", "math", "os", "sys"}}
    assert third_party, "no snippet found"
    missing = {n for n in third_party if DISTRIBUTIONS.get(n, n) not in installed}
    assert not missing, f"README 'Try it' imports {missing} that pip install -e '.[{extras}]' lacks"


def test_serve_without_a_model_names_demo_and_model_dir(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in list(os.environ):
        if name.startswith("SIGLIP_"):
            monkeypatch.delenv(name)

    status = main(["serve"])

    err = capsys.readouterr().err
    assert status == 1
    assert "--demo" in err and "--model-dir" in err


def test_the_license_file_is_the_one_pyproject_names() -> None:
    license_name = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]

    assert license_name == {"text": "MIT"}
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")
