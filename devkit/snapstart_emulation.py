"""SnapStart for the tests: the runtime's hook runner, a search of a process for secrets, a
function process driven over a UNIX socket, and CRIU to checkpoint and restore it.

The runner: the Python base image's runtime client (awslambdaric, as the stand-in base image
installs it: scripts/make_standin_base_image.sh) runs ``snapshot_restore_py``'s registries in
``awslambdaric.lambda_runtime_hooks_runner`` once the init is done under
``AWS_LAMBDA_INITIALIZATION_TYPE=snap-start``: the before-snapshot callables popped (the last
registered first), then, in the restored process, the after-restore callables in order. The
emulator in front of it (aws-lambda-rie) answers its ``GET /runtime/restore/next`` with 404,
so the tests drive the registries themselves: with awslambdaric's own runner (the test extra
installs it), else with the same loops written out here.

Two searches for secrets. In a live process (`reachable`): ``gc.get_objects()`` misses what
``gc.freeze()`` moved to the permanent generation (the init freezes) and the tuples and dicts
CPython stopped tracking (a tuple of key digests), so it unfreezes first and walks
``gc.get_referents`` from every tracked object down to the str and bytes leaves. It cannot see
freed memory, which CPython does not clear; so, in a checkpoint (`checkpoint_copies`), the
memory pages CRIU wrote are searched byte for byte, by the test process: the key never goes to
the checkpointed process in any form (../shared/CONTRACT.md section 7).

CRIU: Debian trixie's criu (4.1) in a debootstrapped root (``SIGLIP_CRIU_ROOT``, made by
scripts/make_criu_root.sh; .ci/run makes it under the checkout), run on the host through that
root's loader. It needs root and a kernel that lets it checkpoint; where it cannot run, the
tests skip naming why.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import secrets
import signal
import socket
import string
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from devkit import ROOT

MASK = 0x5A


# --- the runtime's hook runner -----------------------------------------------------------------


def run_before_snapshot() -> None:
    """What awslambdaric runs once the init is done under snap-start."""
    try:
        from awslambdaric.lambda_runtime_hooks_runner import run_before_snapshot as run
    except ImportError:
        from snapshot_restore_py import get_before_snapshot

        callables = get_before_snapshot()
        while callables:
            func, args, kwargs = callables.pop()
            func(*args, **kwargs)
        return
    run()


def run_after_restore() -> None:
    """What awslambdaric runs in a restored process before its first request."""
    try:
        from awslambdaric.lambda_runtime_hooks_runner import run_after_restore as run
    except ImportError:
        from snapshot_restore_py import get_after_restore

        for func, args, kwargs in get_after_restore():
            func(*args, **kwargs)
        return
    run()


# --- searching a process for secrets -------------------------------------------------------------


def mask(secret: str) -> str:
    """A secret as a command carries it: never its own bytes (the search would find those)."""
    return bytes(b ^ MASK for b in secret.encode()).hex()


def unmask(masked: list[str]) -> list[Any]:
    """The needles for `reachable`: each key as str and bytes, and its SHA-256 digest (what
    auth.py keeps)."""
    import hashlib

    needles: list[Any] = []
    for item in masked:
        raw = bytes(b ^ MASK for b in bytes.fromhex(item))
        needles += [raw, raw.decode(), hashlib.sha256(raw).digest()]
    return needles


def reachable(needles: list[Any]) -> list[int]:
    """Indices of the needles that some object reachable through the garbage collector holds
    (equal to it, or containing it), the needles themselves and their list aside."""
    gc.unfreeze()
    skip = {id(needles), *(id(n) for n in needles)}
    seen: set[int] = set(skip)
    found: set[int] = set()
    stack = [o for o in gc.get_objects() if id(o) not in skip]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, str | bytes | bytearray):
            for index, needle in enumerate(needles):
                # a str needle in text, a bytes needle in bytes (`in` across them raises)
                if (type(needle) is str) == isinstance(item, str) and needle in item:
                    found.add(index)
            continue
        stack.extend(r for r in gc.get_referents(item) if id(r) not in seen)
    return sorted(found)


def record_secrets_calls() -> tuple[list[str], Callable[[], None]]:
    """From now on, the name of every Secrets Manager operation any botocore client calls (a
    list that grows), and the function that stops recording."""
    import botocore.client

    calls: list[str] = []
    make_api_call = botocore.client.BaseClient._make_api_call

    def recording(client: Any, operation_name: str, api_params: Any) -> Any:
        if client.meta.service_model.service_name == "secretsmanager":
            calls.append(operation_name)
        return make_api_call(client, operation_name, api_params)

    def stop() -> None:
        botocore.client.BaseClient._make_api_call = make_api_call

    botocore.client.BaseClient._make_api_call = recording
    return calls, stop


# --- searching a checkpoint for secrets -----------------------------------------------------------

#: The key template.yaml's ApiKeySecret generates: GenerateSecretString with PasswordLength 48
#: and ExcludePunctuation, spaces excluded by default (CloudFormation, "AWS::SecretsManager::
#: Secret GenerateSecretString"): letters and digits.
TEMPLATE_KEY_LENGTH = 48
TEMPLATE_KEY_ALPHABET = string.ascii_letters + string.digits


def template_key() -> str:
    """A fresh random key of the form the template's secret holds."""
    return "".join(secrets.choice(TEMPLATE_KEY_ALPHABET) for _ in range(TEMPLATE_KEY_LENGTH))


def checkpoint_copies(images: Path, key: str) -> dict[str, int]:
    """How many times the memory pages of the checkpoint in `images` (CRIU's ``pages-*.img``)
    hold the key's bytes (``key``) and its raw SHA-256 digest (``sha256``: what auth.py keeps).
    Run in the test process, never in the checkpointed one."""
    needles = {"key": key.encode(), "sha256": hashlib.sha256(key.encode()).digest()}
    copies = dict.fromkeys(needles, 0)
    pages = sorted(images.glob("pages-*.img"))
    if not pages:
        raise FileNotFoundError(f"no pages-*.img in {images}: not a CRIU checkpoint")
    for path in pages:
        data = path.read_bytes()
        for name, needle in needles.items():
            copies[name] += data.count(needle)
    return copies


# --- a function process over a UNIX socket ----------------------------------------------


class FunctionProcess:
    """The function (devkit/snapstart_function.py) in its own process."""

    def __init__(self, env: dict[str, str], work: Path) -> None:
        self.env = env
        self.work = work
        self.socket = work / "fn.sock"
        self.pid = 0

    def start(self, timeout: float = 120.0) -> None:
        # Inherited descriptors closed, a new session, no terminal: what CRIU can restore.
        process = subprocess.Popen(
            [sys.executable, "-m", "devkit.snapstart_function", str(self.socket)],
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
        )
        self.pid = process.pid
        deadline = time.monotonic() + timeout
        while not self.socket.with_suffix(".ready").exists():
            if process.poll() is not None:
                raise RuntimeError(f"the function process exited with {process.returncode}")
            if time.monotonic() > deadline:
                process.kill()
                raise TimeoutError("the function process did not start listening")
            time.sleep(0.05)
        self._process = process

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(120)
            connection.connect(str(self.socket))
            connection.sendall(json.dumps({"op": op, **fields}).encode() + b"\n")
            with connection.makefile("rb") as stream:
                answer: dict[str, Any] = json.loads(stream.readline())
        return answer

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        answer = self.call("invoke", event=event)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    def stop(self) -> None:
        if self.pid:
            with suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            wait_gone(self.pid)


def wait_gone(pid: int, timeout: float = 30.0) -> None:
    """Until the process is gone (reaped when it is our child): its PID is free again."""
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        with suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.02)


def function_env(model_dir: Path, **extra: str) -> dict[str, str]:
    """The environment a SnapStart init gets, for the demo bundle, plus `extra`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SIGLIP_", "AWS_", "POWERTOOLS_", "PYTEST"))
    }
    env.update(
        {
            "AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start",
            "SIGLIP_MODEL_DIR": str(model_dir),
            "SIGLIP_ORT_INTRA_OP_THREADS": "1",
            "SIGLIP_AUTH_MODE": "none",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_NAMESPACE": "SiglipTextTest",
            "ORT_DISABLE_TELEMETRY": "1",
            "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(
                os.pathsep
            ),
        }
    )
    env.update(extra)
    return env


def api_key_env(model_dir: Path, endpoint: str, arn: str) -> dict[str, str]:
    """`function_env` under api-key: the secret's ARN (never its value), Secrets Manager at
    ``endpoint`` (moto on loopback) with test credentials."""
    return function_env(
        model_dir,
        SIGLIP_AUTH_MODE="api-key",
        SIGLIP_API_KEY_SECRET_ARN=arn,
        AWS_ENDPOINT_URL_SECRETS_MANAGER=endpoint,
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
    )


@contextmanager
def function_process(env: dict[str, str], work: Path) -> Iterator[FunctionProcess]:
    process = FunctionProcess(env, work)
    process.start()
    try:
        yield process
    finally:
        process.stop()


# --- CRIU --------------------------------------------------------------------------------------


def criu_root() -> Path:
    return Path(os.environ.get("SIGLIP_CRIU_ROOT", ROOT / ".criu" / "root"))


def criu_command(*args: str) -> list[str]:
    """Trixie's criu, run on the host through the root's own loader and libraries."""
    root = criu_root()
    libs = root / "usr" / "lib" / "x86_64-linux-gnu"
    return [
        str(libs / "ld-linux-x86-64.so.2"),
        "--library-path",
        str(libs),
        str(root / "usr" / "sbin" / "criu"),
        *args,
    ]


def criu_unavailable() -> str | None:
    """Why CRIU cannot checkpoint here, or None when it can."""
    root = criu_root()
    if not (root / "usr" / "sbin" / "criu").exists():
        return f"no criu root at {root} (scripts/make_criu_root.sh makes it; set SIGLIP_CRIU_ROOT)"
    if os.uname().machine != "x86_64":
        return f"the criu root is x86_64, this machine is {os.uname().machine}"
    if os.geteuid() != 0:
        return "criu needs root (CAP_SYS_ADMIN) to checkpoint and restore"
    check = subprocess.run(criu_command("check"), capture_output=True, text=True, timeout=60)
    if check.returncode != 0 or "Looks good" not in check.stdout + check.stderr:
        return f"criu check fails on this kernel: {(check.stdout + check.stderr).strip()[-300:]}"
    return None


def criu_dump(pid: int, images: Path) -> None:
    """Checkpoint the process tree of `pid` into `images`; the process ends."""
    images.mkdir(parents=True, exist_ok=True)
    dumped = subprocess.run(
        criu_command(
            "dump", "-t", str(pid), "--shell-job", "--file-locks", "-D", str(images),
            "-o", "dump.log", "-v4",
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    if dumped.returncode != 0:
        raise RuntimeError(f"criu dump failed: {_log_tail(images / 'dump.log')}")
    wait_gone(pid)


def criu_restore(images: Path, timeout: float = 120.0) -> subprocess.Popen[bytes]:
    """Restore the checkpoint in `images`. criu stays its parent (no ``-d``), so that the
    restored process is reaped when it ends and its PID is free for the next restore; returns
    once criu reports the tasks resumed."""
    log = images / "restore.log"
    log.unlink(missing_ok=True)
    restorer = subprocess.Popen(
        criu_command(
            "restore", "--shell-job", "--file-locks", "-D", str(images), "-o", "restore.log",
            "-v4",
        ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + timeout
    while "Restore finished successfully" not in _read(log):
        if restorer.poll() is not None:
            raise RuntimeError(f"criu restore failed: {_log_tail(log)}")
        if time.monotonic() > deadline:
            restorer.kill()
            raise TimeoutError(f"criu restore did not finish: {_log_tail(log)}")
        time.sleep(0.02)
    return restorer


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _log_tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    errors = [line for line in lines if "Error" in line or "error" in line]
    return "\n".join((errors or lines)[-15:])
