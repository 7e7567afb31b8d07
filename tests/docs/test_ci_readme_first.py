"""CI's first step (.ci/run, up to "# 2."): README.md's "Set up and test" block, run as written
in a copy of the checkout of its own, before any extra is installed; CI fails if it fails.

The step is run here on a small checkout whose README holds a stand-in block (the real one
installs the test extra and runs the whole suite: CI itself runs that), so that what the
step does with the block is seen: where it runs, with which variables, what its failure does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from devkit.paths import ROOT
from devkit.readme import snippet

#: what the step needs to read the block: the docs tests' own parser and what it imports
PARSER = [
    "devkit/__init__.py",
    "devkit/readme.py",
    "devkit/paths.py",
    "devkit/events.py",
]
STEP_END = "# 2. Everything else"


def first_step() -> str:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert STEP_END in ci, f".ci/run has no {STEP_END!r}: its first step cannot be told apart"
    return ci.split(STEP_END, 1)[0]


def checkout(tmp_path: Path, block: str) -> Path:
    """A git checkout holding the step, the parser and a README whose block is ``block``
    (the test skips where git is missing: the step copies the files git lists)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed (the step copies the files git lists)")
    repo = tmp_path / "checkout"
    for name in PARSER:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, repo / name)
    (repo / ".ci").mkdir()
    (repo / ".ci" / "run").write_text(first_step(), encoding="utf-8")
    (repo / "README.md").write_text(
        f"# x\n\n## Set up and test\n\n<!-- snippet: set-up-and-test -->\n```bash\n{block}\n```\n",
        encoding="utf-8",
    )
    git = ["git", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    return repo


def run_step(repo: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp_path), "SIGLIP_AUTH_MODE": "api-key", "CI": "true"}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        ["bash", str(repo / ".ci" / "run")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_the_step_runs_the_readme_block_that_the_docs_tests_read() -> None:
    # the real block: the README's two commands, the test extra and no other
    code = snippet("set-up-and-test").code
    assert snippet("set-up-and-test").source == "README.md"
    assert "pip install" in code and "python -m pytest" in code
    step = first_step()
    assert 'snippet("set-up-and-test")' in step
    # and nothing else is installed before it
    assert "pip install" not in step and "npm" not in step


def test_the_block_runs_in_a_copy_without_siglip_variables(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    # GIVEN a README block that records where it runs and what it sees
    block = f'{{ pwd; ls; env | grep -c "^SIGLIP_\\|^CI=" || true; }} > "{seen}"'
    repo = checkout(tmp_path, f"python() {{ :; }}  # a stand-in\npython -m pytest\n{block}")
    # WHEN the step runs with a SIGLIP_ variable and CI set
    done = run_step(repo, tmp_path)
    assert done.returncode == 0, done.stderr
    where, *listed, siglip_count = seen.read_text().split()
    # THEN the block ran in a copy of the checkout, not in it, with no SIGLIP_ or CI variable,
    assert Path(where).parent == tmp_path and Path(where) != repo
    assert {"README.md", "devkit"} <= set(listed)
    assert siglip_count == "0"
    # and the copy is gone afterwards
    assert not Path(where).exists()


def test_a_failing_block_fails_ci_with_its_exit_status(tmp_path: Path) -> None:
    # GIVEN a README block whose tests fail (a stand-in pytest that exits 3)
    repo = checkout(tmp_path, "python() { return 3; }\npython -m pytest")
    done = run_step(repo, tmp_path)
    assert done.returncode == 3
    assert "THE README'S SET-UP AND TEST BLOCK FAILED (exit 3)" in done.stderr


def test_a_block_that_runs_no_tests_fails_ci(tmp_path: Path) -> None:
    # GIVEN a README block that installs but never runs the tests
    repo = checkout(tmp_path, "true")
    done = run_step(repo, tmp_path)
    # THEN CI fails before anything runs: a newcomer following it would test nothing
    assert done.returncode == 1
    assert "runs no python -m pytest" in done.stderr
