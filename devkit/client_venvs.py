"""The Python clients of docs/clients.md that cannot share one environment with the test
extra (their pydantic caps exclude the one aws-sam-translator pins; docs/clients.md says
which): each gets a venv of its own, ``.ci/venvs/<name>``, made by .ci/client_venvs.sh with
the client and what its snippet needs, never the project. Their tests run the documented
snippet in that venv's python in a subprocess, as the Node snippets run under node.

    python -m devkit.client_venvs     # one line a venv: its name, then what it installs
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from devkit.paths import ROOT

VENVS = ROOT / ".ci" / "venvs"
#: venv (the snippet's name) -> what .ci/client_venvs.sh installs into it
PACKAGES = {
    "crewai": ["crewai", "openai", "numpy"],
    "camel-ai": ["camel-ai", "openai", "numpy"],
}
#: what a snippet run here prints last: its ``vectors``, as JSON
PRINT_VECTORS = (
    "\nimport json as _json\n"
    "print(_json.dumps([[float(x) for x in vector] for vector in vectors]))\n"
)


def python(name: str) -> Path:
    return VENVS / name / "bin" / "python"


def missing(name: str) -> str | None:
    """Why venv ``name`` cannot run a snippet (a skip's reason), or None where it can."""
    if python(name).is_file():
        return None
    return (
        f"no {name} venv: {python(name).relative_to(ROOT)} is missing "
        f"(.ci/client_venvs.sh makes it: pip install {' '.join(PACKAGES[name])})"
    )


def run(name: str, code: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in venv ``name``'s python, with this environment less what would reach
    into it (the project on PYTHONPATH, OPENAI_* settings) and a home of its own (``home``)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OPENAI_", "PYTHON", "VIRTUAL_ENV", "SIGLIP_"))
    }
    env["HOME"] = str(home)
    return subprocess.run(
        [str(python(name)), "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=home,
        check=False,
    )


def snippet_vectors(name: str, code: str, home: Path) -> tuple[list[list[float]], str]:
    """Run a snippet's ``code`` in venv ``name``; its ``vectors`` and what it printed before
    them. A failure (an error from the server, say) fails with the subprocess's stderr."""
    done = run(name, code + PRINT_VECTORS, home)
    assert done.returncode == 0, done.stderr[-4000:]
    *printed, vectors = done.stdout.rstrip("\n").split("\n")
    return json.loads(vectors), "\n".join(printed)


def main() -> int:
    for name, packages in PACKAGES.items():
        print(name, *packages)
    return 0


if __name__ == "__main__":
    sys.exit(main())
