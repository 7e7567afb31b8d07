"""Real servers for the tests: `siglip-text serve --demo` in a subprocess on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def demo_server(**settings: str) -> Iterator[str]:
    """`siglip-text serve --demo` in a subprocess with extra ``SIGLIP_*`` settings; its URL."""
    import os
    import subprocess
    import sys
    import time

    import httpx

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGLIP_")}
    env["SIGLIP_ORT_INTRA_OP_THREADS"] = "1"
    env.update(settings)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "siglip_text.cli",
            "serve",
            "--demo",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited: {process.stderr.read().decode()}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("server did not become healthy in 60 s")
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
