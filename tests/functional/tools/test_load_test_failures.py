"""`siglip-text load-test` says why requests failed: refused, timed out, or the status and
the error's message."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from siglip_text.cli import main


def _run(url: str, tmp_path: Path, *extra: str) -> tuple[int, dict]:
    out = tmp_path / "load.json"
    argv = ["load-test", "--url", url, "--requests", "2", "--concurrency", "1", "--warmup", "0"]
    status = main([*argv, "--json", str(out), *extra])
    return status, json.loads(out.read_text())


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A loopback port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield int(sock.getsockname()[1])


def test_a_server_that_is_down_is_reported_as_connection_refused(
    closed_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, summary = _run(f"http://127.0.0.1:{closed_port}/v1", tmp_path)

    assert status == 1
    [(reason, count)] = summary["failures"].items()
    assert reason.startswith("connection refused") and count == 2
    assert "connection refused" in capsys.readouterr().out


def test_a_server_that_never_answers_is_reported_as_a_timeout(
    silent_server: int, tmp_path: Path
) -> None:
    status, summary = _run(f"http://127.0.0.1:{silent_server}", tmp_path, "--timeout", "0.3")

    assert status == 1
    [(reason, count)] = summary["failures"].items()
    assert reason.startswith("timeout: no answer within 0.3 s") and count == 2


def test_an_error_status_is_reported_with_the_error_message(
    live_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, summary = _run(live_server + "/v1", tmp_path, "--model", "not-the-served-model")

    assert status == 1
    [(reason, count)] = summary["failures"].items()
    assert reason.startswith("404 ") and "not-the-served-model" in reason and count == 2
    assert "not-the-served-model" in capsys.readouterr().out
