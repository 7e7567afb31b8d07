"""One source for the version: ``siglip_text.__version__``, which pyproject.toml reads and the
changelog names."""

from __future__ import annotations

import re
import tomllib

import siglip_text

from devkit.paths import ROOT


def test_pyproject_takes_the_version_from_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # THEN pyproject writes no version of its own: it reads siglip_text.__version__
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "siglip_text.__version__"}


def test_changelog_has_a_section_for_the_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", changelog, re.MULTILINE)
    assert "## [Unreleased]" in changelog
    assert siglip_text.__version__ in released, released
