"""The package's module boundaries: import-linter's contracts ([tool.importlinter] in
pyproject.toml), and what the command line loads before it runs a tool."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devkit.paths import ROOT


@pytest.mark.slow
def test_import_contracts_are_kept() -> None:
    # GIVEN the layers and forbidden imports declared in pyproject.toml
    lint = shutil.which("lint-imports")
    if lint is None:
        pytest.skip("lint-imports is in the test extra (import-linter)")
    # WHEN import-linter checks the package
    result = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True, timeout=120)
    # THEN every contract is kept (a runtime module importing the tools breaks the first)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    "argv", [["load-test", "--help"], ["bench", "--help"], ["--help"], ["export", "--help"]]
)
def test_the_command_line_loads_only_the_chosen_command(argv: list[str]) -> None:
    # GIVEN a fresh interpreter
    code = (
        "import json, sys\n"
        "from siglip_text.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('onnxruntime', "
        "'tokenizers', 'siglip_text.tools', 'torch')))), file=sys.stderr)\n"
    )
    # WHEN it parses the command line (argparse prints the help and exits)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    loaded = set(json.loads(result.stderr.strip().splitlines()[-1]))
    # THEN only the chosen command's module was imported; load-test (alias bench) is
    # standard library only
    tools = {m for m in loaded if m.startswith("siglip_text.tools.")}
    if argv[0] in ("load-test", "bench"):
        assert not loaded & {"onnxruntime", "tokenizers", "torch"}, sorted(loaded)
        standard_library_only = {"load_generator", "texts", "urls", "exit_status"}
        assert tools <= {f"siglip_text.tools.{m}" for m in standard_library_only}, sorted(tools)
    elif argv[0] == "--help":
        assert not loaded, sorted(loaded)
    else:
        assert "siglip_text.tools.export.command" in tools
        assert not {"siglip_text.tools.verify.command", "siglip_text.tools.load_generator"} & tools
        assert "torch" not in loaded


def test_architecture_layout_names_every_module_of_the_package() -> None:
    # GIVEN the "Layout" section of docs/architecture.md and the package's modules on disk
    architecture = (ROOT / "docs" / "architecture.md").read_text()
    layout = architecture.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    package = ROOT / "handler" / "siglip_text"
    modules = {
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if path.name != "__init__.py"
    }

    # THEN each module is named there (in a subpackage: the subpackage and the module's name)
    def named(module: str) -> bool:
        path = Path(module)
        if path.parent == Path("."):
            return path.name in layout
        return f"{path.parent.name}/" in layout and path.stem in layout

    missing = {module for module in modules if not named(module)}
    assert not missing, f"docs/architecture.md 'Layout' does not name: {sorted(missing)}"
