"""docs/deploy.md's smoke test reads the stack's own name and either form of the key.

The two `python3 -c` programs of the smoke test are taken from the page as written and run
here: the stack name from samconfig.toml (the deploy section, where `sam deploy --guided`
saves a name it was given, over the global one: the SAM CLI's precedence), and the key from
the secret's value (a plain key, or `{"keys": ["<new>", "<old>"]}` during a rotation).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from devkit.paths import ROOT

DEPLOY = ROOT / "docs" / "deploy.md"


def smoke_test_programs() -> tuple[str, str]:
    text = DEPLOY.read_text()
    section = text[text.index("## Smoke test") :]
    block = section[section.index("```bash") : section.index("```", section.index("```bash") + 7)]
    programs = re.findall(r"python3 -c \\?\s*'([^']*)'", block)
    stack, key = programs
    return stack, key


def run(program: str, cwd: Path, stdin: str = "") -> str:
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=cwd, input=stdin, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_smoke_test_reads_the_stack_name_sam_deploy_used(tmp_path: Path) -> None:
    stack, _ = smoke_test_programs()
    # GIVEN the repository's samconfig.toml THEN its stack name
    shutil.copy2(ROOT / "samconfig.toml", tmp_path / "samconfig.toml")
    assert run(stack, tmp_path) == "siglip-text"
    # GIVEN a guided run that saved another name in the deploy section THEN that one
    text = (tmp_path / "samconfig.toml").read_text()
    text = text.replace(
        "[default.deploy.parameters]\n", '[default.deploy.parameters]\nstack_name = "emb-prod"\n'
    )
    (tmp_path / "samconfig.toml").write_text(text)
    assert run(stack, tmp_path) == "emb-prod"


def test_the_smoke_test_takes_the_new_key_in_either_form_of_the_secret(tmp_path: Path) -> None:
    _, key = smoke_test_programs()
    assert run(key, tmp_path, "abc123\n") == "abc123"
    assert run(key, tmp_path, '{"keys": ["new456", "abc123"]}\n') == "new456"
