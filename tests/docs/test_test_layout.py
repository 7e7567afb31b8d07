"""The test tree mirrors the runtime (tests/README.md): every runtime module has
``tests/unit/<layer>/test_<module>.py``, every unit file is named for a module of its folder,
and every behaviour file sits in a folder named for the path it exercises."""

from __future__ import annotations

from pathlib import Path

from devkit import ROOT

PACKAGE = ROOT / "handler" / "siglip_text"
TESTS = ROOT / "tests"
#: the runtime's layers: the package's top level ("") and its folders, tools/ and demo/ aside
LAYERS = ("", "engine", "http", "aws")
#: unit folders for what is not the runtime, and where their modules are
OTHER_UNITS = {
    "tools": PACKAGE / "tools",
    "scripts": ROOT / "scripts",
    "benchmarks": ROOT / "benchmarks",
}
#: the paths behaviour tests exercise (tests/README.md says what each holds)
FUNCTIONAL = {
    "auth",
    "bundle",
    "clients",
    "export",
    "http",
    "image",
    "lambda",
    "serve",
    "snapstart",
    "tools",
}


def runtime_modules(layer: str) -> set[str]:
    """The modules of one layer (its ``__init__.py`` aside)."""
    folder = PACKAGE / layer if layer else PACKAGE
    return {path.stem for path in folder.glob("*.py") if path.name != "__init__.py"}


def names_a_module(test_file: Path, modules: set[str]) -> bool:
    """``test_<module>.py``, or ``test_<module>_<aspect>.py`` where one file would grow long."""
    stem = test_file.stem.removeprefix("test_")
    return any(stem == name or stem.startswith(f"{name}_") for name in modules)


def test_every_runtime_module_has_a_unit_test_file_named_for_it() -> None:
    missing = []
    for layer in LAYERS:
        for name in runtime_modules(layer):
            expected = TESTS / "unit" / layer / f"test_{name}.py"
            if not expected.is_file():
                missing.append(expected.relative_to(ROOT).as_posix())
    assert not missing, f"runtime modules without their unit test file: {sorted(missing)}"


def test_every_unit_test_file_is_named_for_a_module_of_its_folder() -> None:
    misplaced = []
    for test_file in sorted((TESTS / "unit").rglob("test_*.py")):
        folder = test_file.parent.relative_to(TESTS / "unit").as_posix()
        folder = "" if folder == "." else folder
        if folder in LAYERS:
            # test_init_<aspect>.py: what a package's __init__.py holds (the version)
            modules = runtime_modules(folder) | {"init"}
        elif folder in OTHER_UNITS:
            modules = {path.stem for path in OTHER_UNITS[folder].rglob("*.py")}
        else:
            modules = set()
        if not names_a_module(test_file, modules):
            misplaced.append(test_file.relative_to(ROOT).as_posix())
    assert not misplaced, (
        f"unit test files not named for a module of their folder (tests/README.md): {misplaced}"
    )


def test_every_behaviour_file_sits_in_a_folder_named_for_its_path() -> None:
    functional = TESTS / "functional"
    loose = [p.name for p in functional.glob("test_*.py")]
    assert not loose, f"behaviour tests outside a folder (tests/README.md): {loose}"
    folders = {p.parent.relative_to(functional).as_posix() for p in functional.rglob("test_*.py")}
    assert folders <= FUNCTIONAL, f"folders tests/README.md does not name: {folders - FUNCTIONAL}"


def test_every_test_folder_is_a_package() -> None:
    # two test files of one name in two folders (unit/http/test_errors.py and
    # unit/engine/test_errors.py) import apart only as modules of packages
    folders = {p.parent for p in TESTS.rglob("test_*.py")}
    missing = [f.relative_to(ROOT).as_posix() for f in folders if not (f / "__init__.py").is_file()]
    assert not missing, f"test folders without __init__.py: {sorted(missing)}"


def test_the_readme_of_the_tests_names_every_behaviour_folder() -> None:
    readme = (TESTS / "README.md").read_text(encoding="utf-8")
    unnamed = [name for name in sorted(FUNCTIONAL) if f"`{name}/`" not in readme]
    assert not unnamed, f"tests/README.md does not say what these folders hold: {unnamed}"
