"""`sam deploy --guided` driven as a person at a terminal drives it, up to where it needs AWS.

The SAM CLI runs under a pseudo-terminal (it prompts with click), with no AWS credentials and
no configuration files, so it asks its questions and then stops at its first call to AWS.
Each prompt (a line ending in ": " after which the CLI waits) gets the answer whose key it
contains, else Enter (the default offered). What it asked and printed is returned.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: How long the CLI stays silent after a line ending in ": " before it counts as a prompt.
_QUIET_S = 0.5


@dataclass
class GuidedRun:
    questions: list[str]
    transcript: str
    returncode: int


def drive_guided(
    sam: str, project: Path, answers: dict[str, str], *, timeout: float = 180
) -> GuidedRun:
    main, secondary = pty.openpty()
    home = project / ".guided-home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "SAM_CLI_TELEMETRY": "0",
        # no credentials, no configuration, no instance metadata: AWS is never reached
        "AWS_CONFIG_FILE": str(home / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "DOCKER_HOST": os.environ.get("DOCKER_HOST", ""),
    }
    process = subprocess.Popen(
        [sam, "deploy", "--guided"],
        cwd=project,
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env=env,
        close_fds=True,
    )
    os.close(secondary)
    transcript, pending, questions = "", "", []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], _QUIET_S)
            if ready:
                try:
                    chunk = os.read(main, 4096).decode(errors="replace")
                except OSError:  # the CLI exited and closed the terminal
                    break
                if not chunk:
                    break
                transcript += chunk
                pending += chunk
                continue
            text = _ANSI.sub("", pending).replace("\r", "")
            if text.rstrip(" ").endswith(":") and text.endswith(" "):
                question = text.strip().splitlines()[-1].strip()
                questions.append(question)
                reply = next((v for k, v in answers.items() if k in question), "")
                os.write(main, (reply + "\n").encode())
                pending = ""
            elif process.poll() is not None:
                break
        else:
            raise TimeoutError(f"sam deploy --guided still running:\n{_ANSI.sub('', transcript)}")
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        os.close(main)
    return GuidedRun(questions, _ANSI.sub("", transcript).replace("\r", ""), process.returncode)
