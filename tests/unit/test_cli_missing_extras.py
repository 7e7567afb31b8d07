"""A command whose optional extra is missing exits 2 with the one install line, no traceback.

The extra's modules are made unimportable in this process the way Python itself marks a
module as absent: ``sys.modules[name] = None`` makes ``import name`` raise
ModuleNotFoundError and ``importlib.util.find_spec(name)`` answer None.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from siglip_text.cli import INSTALL_LINES, NEEDS, main, missing_module_message

SHA = "0123456789abcdef0123456789abcdef01234567"


def _block(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in modules:
            monkeypatch.delitem(sys.modules, name)
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def _argv(command: str, tmp_path: Path) -> list[str]:
    (tmp_path / "texts.txt").write_text("a photo of a dog\n")
    return {
        "export": [
            "export",
            "google/siglip2-base-patch16-224",
            "--revision",
            SHA,
            "--out",
            str(tmp_path / "bundle"),
        ],
        "reference": [
            "reference",
            "google/siglip2-base-patch16-224",
            str(tmp_path / "texts.txt"),
            "--revision",
            SHA,
            "--out",
            str(tmp_path / "ref.jsonl"),
        ],
        "serve": ["serve", "--demo"],
        "check-deploy": ["check-deploy"],
    }[command]


@pytest.mark.parametrize("command", sorted(NEEDS))
def test_a_command_without_its_extra_exits_2_with_the_install_line(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a venv without the command's extra
    extra, modules = NEEDS[command]
    _block(monkeypatch, *modules)

    # WHEN the command runs as documented
    status = main(_argv(command, tmp_path))

    # THEN it names the extra and gives the one line that installs it, and nothing else ran
    err = capsys.readouterr().err
    assert status == 2
    assert f"siglip-text {command}: needs the '{extra}' extra" in err
    assert INSTALL_LINES[extra] in err
    assert "Traceback" not in err
    assert not (tmp_path / "bundle").exists()


def test_the_export_install_line_takes_torch_from_the_cpu_wheel_index() -> None:
    assert "--index-url https://download.pytorch.org/whl/cpu" in INSTALL_LINES["export"]
    assert "'.[export]'" in INSTALL_LINES["export"]


@pytest.mark.parametrize("name", ["transformers.utils.hub", "torch", "onnx", "uvicorn", "yaml"])
def test_a_missing_module_of_an_extra_raised_later_gets_the_install_line(name: str) -> None:
    message = missing_module_message(ModuleNotFoundError(f"No module named {name!r}", name=name))

    assert message is not None and "install it with" in message


def test_a_missing_module_of_no_extra_is_not_explained_away() -> None:
    assert missing_module_message(ModuleNotFoundError("x", name="numpy")) is None
