"""Shared fixtures: the real demo bundle, the real ORT session, events and a Lambda context."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from siglip_text.api import create_app
from siglip_text.config import Settings, demo_model_dir, load_settings
from siglip_text.service import EmbeddingService, load_service

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
EVENTS = ROOT / "events"


@dataclass
class LambdaContext:
    """The attributes of Lambda's context object that Powertools and Mangum read."""

    function_name: str = "siglip-text"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 3008
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:siglip-text"
    aws_request_id: str = "52fdfc07-2182-154f-163f-5f0f9a621d72"
    log_group_name: str = "/aws/lambda/siglip-text"
    log_stream_name: str = "2026/11/30/[$LATEST]abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


@pytest.fixture(scope="session")
def demo_dir() -> Path:
    return demo_model_dir()


@pytest.fixture(scope="session")
def reference() -> dict[str, Any]:
    """Reference ids (HF tokenizer) and vectors (PyTorch) written by make_demo_bundle.py."""
    return json.loads((FIXTURES / "demo_reference.json").read_text())


@pytest.fixture(scope="session")
def openai_schema() -> dict[str, Any]:
    return json.loads((FIXTURES / "openai-embeddings-schema.json").read_text())


@pytest.fixture(scope="session")
def settings(demo_dir: Path) -> Settings:
    return load_settings(model_dir=demo_dir, ort_intra_op_threads=1)


@pytest.fixture(scope="session")
def service(settings: Settings) -> EmbeddingService:
    return load_service(settings)


@pytest.fixture(scope="session")
def client(service: EmbeddingService, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(service, settings)) as test_client:
        yield test_client


@pytest.fixture
def bundle_copy(tmp_path: Path, demo_dir: Path) -> Path:
    """A writable copy of the demo bundle, to corrupt one artifact at a time."""
    target = tmp_path / "bundle"
    shutil.copytree(demo_dir, target)
    return target


@pytest.fixture
def lambda_context() -> LambdaContext:
    return LambdaContext()


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def live_server() -> Iterator[str]:
    """A real `siglip-text serve --demo` process on a free loopback port; yields its base URL."""
    with demo_server() as base:
        yield base


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
