"""Real servers for the tests: `siglip-text serve --demo` in a subprocess on loopback.

`demo_server` yields its base URL; `running_server` a `LiveServer`: the URL, the process (to
send SIGTERM and read the exit status), and its memory from ``/proc`` (resident set and its
peak, which ``clear_refs`` resets, so that a peak is measured over one phase of a test only).
`serving` is what both run on: ``siglip-text serve`` with any arguments (``--model-dir``
for a bundle), healthy, in a subprocess.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest

from devkit.keys import KEY
from devkit.secrets_manager import secrets_server

MIB = 1024 * 1024
#: The model id ``siglip-text serve --demo`` answers with.
DEMO_MODEL = "siglip-text/synthetic-demo-tiny"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def direct_float(base: str, texts: list[str], model: str = DEMO_MODEL) -> np.ndarray:
    """``texts``' vectors as plain HTTP gets them from ``base`` (``encoding_format`` float):
    what a client library's vectors are compared with."""
    response = httpx.post(
        f"{base}/v1/embeddings",
        json={"model": model, "input": texts, "encoding_format": "float"},
        timeout=30,
    )
    response.raise_for_status()
    return np.array([item["embedding"] for item in response.json()["data"]], dtype=np.float64)


@contextmanager
def demo_server(**settings: str) -> Iterator[str]:
    """`siglip-text serve --demo` in a subprocess with extra ``SIGLIP_*`` settings; its URL."""
    with running_server(**settings) as server:
        yield server.base


@dataclass
class LiveServer:
    base: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path  # its stderr: a file, so that a chatty server never blocks on a full pipe

    @property
    def url(self) -> str:
        return f"{self.base}/v1/embeddings"

    def _status(self, field: str) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024  # kB
        raise LookupError(field)

    def rss(self) -> int:
        """Resident set size now, in bytes."""
        return self._status("VmRSS")

    def reset_peak(self) -> None:
        """Start a new peak: VmHWM becomes the current RSS (Linux ``clear_refs`` value 5)."""
        Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")

    def peak_rss(self) -> int:
        """The peak resident set since the last `reset_peak` (or since the start), bytes."""
        return self._status("VmHWM")

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def stderr(self) -> str:
        """What the server has logged so far."""
        return self.log.read_text(errors="replace")


@contextmanager
def running_server(
    *, log_level: str = "warning", args: Sequence[str] = (), **settings: str
) -> Iterator[LiveServer]:
    """`siglip-text serve --demo` with extra ``SIGLIP_*`` settings and command-line ``args``,
    healthy; stopped after."""
    with serving(["--demo", *args, "--log-level", log_level], settings) as server:
        yield server


@contextmanager
def serving(
    serve_args: Sequence[str],
    settings: Mapping[str, str] | None = None,
    *,
    healthy_within: float = 60,
) -> Iterator[LiveServer]:
    """``siglip-text serve SERVE_ARGS`` in a subprocess on a free loopback port, without this
    environment's ``SIGLIP_*`` but with one intra-op thread and ``settings``; healthy within
    ``healthy_within`` seconds; killed after."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGLIP_")}
    env["SIGLIP_ORT_INTRA_OP_THREADS"] = "1"
    env.update(settings or {})
    command = [sys.executable, "-m", "siglip_text.cli", "serve", "--port", str(port)]
    with tempfile.NamedTemporaryFile(prefix="siglip-serve-", suffix=".log", delete=False) as log:
        process = subprocess.Popen(
            [*command, *serve_args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    server = LiveServer(f"http://127.0.0.1:{port}", port, process, Path(log.name))
    deadline = time.monotonic() + healthy_within
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited: {server.stderr()}")
            try:
                if httpx.get(f"{server.base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not become healthy in {healthy_within:g} s")
            time.sleep(0.1)
        yield server
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        server.log.unlink(missing_ok=True)


@contextmanager
def keyed_server(**settings: str) -> Iterator[LiveServer]:
    """`running_server` in auth mode api-key, its key (`devkit.keys.KEY`) in moto's Secrets
    Manager on loopback (`secrets_manager.secrets_server`)."""
    with (
        pytest.MonkeyPatch.context() as patch,
        secrets_server(KEY, patch) as secrets,
        running_server(
            SIGLIP_AUTH_MODE="api-key", SIGLIP_API_KEY_SECRET_ARN=secrets.arn, **settings
        ) as live,
    ):
        yield live
