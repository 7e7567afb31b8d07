"""Python in a process of its own, from the repository root: the benchmarks' and the entry
points' commands as a user runs them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping

from devkit import ROOT


def python(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 300, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``python *args`` in the repository root, its output captured; with ``check``, its
    exit status must be 0 (the failure shows the end of its stderr)."""
    done = subprocess.run(
        [sys.executable, *args],
        env=None if env is None else dict(env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check:
        assert done.returncode == 0, done.stderr[-2000:]
    return done
