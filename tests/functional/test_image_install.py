"""The function image's install, replayed without Docker, then every event through it.

handler/Dockerfile's steps are read (tests/support/deployment.py) and replayed into a fresh
directory standing for the image's root: the same COPY steps, and the same RUN commands (pip
installs the same hashed lock with ``--target``, from local wheels since tests have no network).
The entry point is then imported from there in a separate interpreter that sees nothing else
(``-S``: no site-packages), with the function's environment from template.yaml, ``HOME`` an
empty directory that must stay empty, and only a tmp directory writable: a Python audit hook
reports any write elsewhere, and the image directory is compared file by file before and after.

The wheels come from ``.wheelhouse/``, which .ci/run fills at set-up time:

pip download --only-binary=:all: -r layers/python/requirements.txt -d .wheelhouse
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.aws_lambda import expected_status
from tests.support.deployment import (
    DOCKERFILE,
    LAMBDA_TASK_ROOT,
    Dockerfile,
    dockerignore_patterns,
    excluded_from_context,
    function_environment,
    load_template,
    parameter_defaults,
    parse_dockerfile,
)
from tests.support.paths import EVENTS, ROOT

WHEELHOUSE = ROOT / ".wheelhouse"
DEMO_BUNDLE = "handler/siglip_text/demo"
SETUP = "pip download --only-binary=:all: -r layers/python/requirements.txt -d .wheelhouse"

if not WHEELHOUSE.is_dir() and os.environ.get("CI") != "true":
    pytest.skip(
        f"no .wheelhouse/ (the image install is replayed offline); run `{SETUP}` first, as "
        ".ci/run does",
        allow_module_level=True,
    )

DRIVER = textwrap.dedent(
    """
    import json, os, sys, sysconfig

    TASK_ROOT = os.environ["LAMBDA_TASK_ROOT"]
    # Lambda's /tmp is TMPDIR here: the literal /tmp also holds this test's image and HOME.
    WRITABLE = (os.environ["TMPDIR"], "/dev/")
    WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    violations = []

    def outside(path):
        if isinstance(path, int) or path is None:
            return False
        path = os.path.abspath(os.fsdecode(path))
        return not any(path == w.rstrip("/") or path.startswith(w.rstrip("/") + "/")
                       for w in WRITABLE)

    def audit(event, args):
        if event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & WRITE_FLAGS)
            if writing and outside(path):
                violations.append([event, os.fsdecode(path)])
        elif event in ("os.mkdir", "os.remove", "os.rmdir", "os.truncate", "os.chmod"):
            if outside(args[0]):
                violations.append([event, os.fsdecode(args[0])])
        elif event in ("os.rename", "os.replace", "os.link", "os.symlink"):
            if outside(args[1]):
                violations.append([event, os.fsdecode(args[1])])

    sys.addaudithook(audit)
    sys.path.insert(0, TASK_ROOT)
    os.chdir(TASK_ROOT)  # the base image's working directory

    class Context:
        function_name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
        function_version = "$LATEST"
        memory_limit_in_mb = int(os.environ["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"])
        invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:siglip-text"
        aws_request_id = "52fdfc07-2182-154f-163f-5f0f9a621d72"
        log_group_name = "/aws/lambda/siglip-text"
        log_stream_name = "2026/11/30/[$LATEST]abcdef"

        def get_remaining_time_in_millis(self):
            return 28_000

    module = __import__(sys.argv[1].rpartition(".")[0], fromlist=["handler"])
    handler = getattr(module, sys.argv[1].rpartition(".")[2])
    statuses = {}
    for path in sys.argv[2:]:
        with open(path, encoding="utf-8") as f:
            statuses[os.path.basename(path)] = handler(json.load(f), Context())["statusCode"]
    import aws_xray_sdk  # noqa: F401  (EnableTracing=true needs it in the image too)

    stdlib = {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
    foreign = sorted(
        name for name, m in list(sys.modules.items())
        if name != "__main__" and getattr(m, "__file__", None)
        and not m.__file__.startswith(TASK_ROOT)
        and not any(m.__file__.startswith(s) for s in stdlib)
    )
    print("RESULT " + json.dumps({"statuses": statuses, "violations": violations,
                                 "foreign": foreign}))
    """
)


def image_path(image: Path, path: str) -> Path:
    """Where an absolute path of the image lies in the replayed root."""
    assert path.startswith("/"), path
    return image / path.lstrip("/")


def replay_copy(source: str, destination: str, image: Path, ignored: list[str]) -> None:
    """COPY <source> <destination> from the build context (the repository root)."""
    origin = ROOT / source
    target = image_path(image, destination)
    if origin.is_dir():
        for file in sorted(origin.rglob("*")):
            relative = file.relative_to(ROOT).as_posix()
            if file.is_file() and not excluded_from_context(relative, ignored):
                copy = target / file.relative_to(origin)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(file, copy)
    else:
        assert not excluded_from_context(source, ignored), f"{source} is not in the context"
        if destination.endswith("/"):
            target = target / origin.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin, target)


def replay_run(command: str, image: Path) -> None:
    """RUN <cmd> && <cmd>: python3 (pip from the wheelhouse) and test; nothing else."""
    for part in command.split("&&"):
        argv = [
            str(image_path(image, arg)) if arg.startswith("/") else arg for arg in shlex.split(part)
        ]
        if argv[0] == "python3":
            argv[0] = sys.executable
            if argv[1:4] == ["-m", "pip", "install"]:
                argv[4:4] = ["--no-index", "--find-links", str(WHEELHOUSE), "--quiet"]
        elif argv[0] == "test":
            argv[0] = shutil.which("test") or "/usr/bin/test"
        else:
            pytest.fail(f"the Dockerfile runs {argv[0]!r}, which this replay does not know")
        done = subprocess.run(
            argv,
            cwd=image_path(image, LAMBDA_TASK_ROOT),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"RUN {part.strip()} failed:\n{done.stdout}\n{done.stderr}"


def build(dockerfile: Dockerfile, image: Path) -> None:
    image_path(image, LAMBDA_TASK_ROOT).mkdir(parents=True)
    ignored = dockerignore_patterns()
    for step in dockerfile.steps:
        if step[0] == "COPY":
            replay_copy(step[1], step[2], image, ignored)
        else:
            replay_run(step[1], image)


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(directory).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in directory.rglob("*")
    }


def test_the_image_install_serves_every_event_with_only_tmp_writable(tmp_path: Path) -> None:
    assert WHEELHOUSE.is_dir(), f"CI must prepare .wheelhouse/: {SETUP}"
    # GIVEN the image built by replaying the Dockerfile, with the demo bundle as MODEL_DIR
    dockerfile = parse_dockerfile(DOCKERFILE, build_args={"MODEL_DIR": DEMO_BUNDLE})
    image, home, tmp = tmp_path / "image", tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    build(dockerfile, image)
    # AND the function's environment: the image's ENV, then the template's (AuthMode=none,
    # as no Secrets Manager is reachable), then what Lambda itself sets
    template = load_template()
    env = {**dockerfile.env, **function_environment(template, AuthMode="none")}
    env = {k: str(image_path(image, v)) if v.startswith("/") else v for k, v in env.items()}
    env.update(
        PATH=os.environ.get("PATH", "/usr/bin:/bin"),
        HOME=str(home),
        TMPDIR=str(tmp),
        LANG="C.UTF-8",
        LAMBDA_TASK_ROOT=str(image_path(image, LAMBDA_TASK_ROOT)),
        AWS_LAMBDA_FUNCTION_NAME="siglip-text",
        AWS_LAMBDA_FUNCTION_MEMORY_SIZE=parameter_defaults(template)["MemorySize"],
        AWS_REGION="us-east-1",
        AWS_DEFAULT_REGION="us-east-1",
    )
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    events = sorted(EVENTS.glob("*.json"))
    before = snapshot(image)

    # WHEN the entry point of the Dockerfile's CMD is imported and every event invoked
    done = subprocess.run(
        [sys.executable, "-S", str(driver), dockerfile.cmd[0], *map(str, events)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    # THEN it served each event as the in-process handler test expects
    assert done.returncode == 0, done.stderr[-4000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))
    assert result["statuses"] == {p.name: expected_status(p.name) for p in events}
    # AND imported nothing from outside the image (no site-packages of the test's venv)
    assert result["foreign"] == []
    # AND wrote nothing outside tmp: no audit-hook report, no file changed in the image,
    # nothing under HOME (which native code could write to, unseen by the hook)
    assert result["violations"] == []
    assert snapshot(image) == before
    assert list(home.iterdir()) == []
