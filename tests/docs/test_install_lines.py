"""The export install the docs give is CPU-only for real, and pyproject agrees with it.

From PyPI, torch for Linux x86_64 is the CUDA build; PyTorch's CPU wheels are on its own
index. Every user-facing line that installs the export extra must take torch from there
first, pin a torch the extra accepts, and torch must be in no other extra.
"""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.version import Version
from siglip_text.cli import INSTALL_LINES

from devkit.paths import ROOT

CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
DOCS = ["README.md", "docs/export.md", "docs/performance.md"]
EXPORT_INSTALL = re.compile(r"pip install [^\n`]*\.\[[a-z,]*\bexport\b[a-z,]*\]")
TORCH_INSTALL = re.compile(r"pip install torch==([^\s`]+) --index-url ([^\s`]+)")


def _extras() -> dict[str, list[Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {
        extra: [Requirement(line) for line in lines]
        for extra, lines in project["optional-dependencies"].items()
    }


def test_torch_is_in_the_export_extra_only() -> None:
    holders = [
        extra
        for extra, requirements in _extras().items()
        if any(r.name == "torch" for r in requirements)
    ]

    assert holders == ["export"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(Requirement(line).name == "torch" for line in project["dependencies"])


def test_each_documented_export_install_takes_cpu_torch_first() -> None:
    # GIVEN every line of the user docs that installs the export extra
    [torch] = [r for r in _extras()["export"] if r.name == "torch"]
    found = 0
    for name in DOCS:
        text = (ROOT / name).read_text()
        for match in EXPORT_INSTALL.finditer(text):
            found += 1
            # THEN torch was installed just before, from PyTorch's CPU index, at a version
            # the extra accepts (so the extra's install keeps it)
            before = text[max(0, match.start() - 300) : match.start()]
            installs = TORCH_INSTALL.findall(before)
            assert installs, f"{name}: {match.group()!r} without CPU torch just before it"
            version, index = installs[-1]
            assert index == "https://download.pytorch.org/whl/cpu", name
            assert torch.specifier.contains(Version(version)), (name, version, torch)
            assert "torch==" not in match.group(), f"{name}: torch from PyPI: {match.group()!r}"
    assert found >= len(DOCS)


def test_the_cli_install_line_is_the_documented_one() -> None:
    line = INSTALL_LINES["export"]

    assert CPU_INDEX in line
    assert line.split(" && ")[0] in (ROOT / "docs" / "export.md").read_text()


def test_the_image_lock_holds_no_export_package() -> None:
    # The function image serves with ONNX Runtime alone: the export extra's packages (and
    # the CUDA libraries a PyPI torch brings) must never reach its lock.
    lock = (ROOT / "layers" / "python" / "requirements.txt").read_text()
    pinned = {m.lower() for m in re.findall(r"^([A-Za-z0-9_.-]+)==", lock, flags=re.M)}
    export = {r.name.lower() for r in _extras()["export"]} - {"openai"}

    assert pinned, "no pins found in the lock"
    assert not pinned & export
    assert not {name for name in pinned if name.startswith("nvidia-")}
