"""`siglip-text embed --url`: requests in flight, input order, retries, resume.

Against a real `serve --demo` on loopback; where the test needs to count what reached the
server, or to play a throttling frontend, a loopback proxy stands between (the vectors are
still the server's).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from siglip_text.cli import main
from siglip_text.engine.service import EmbeddingService

from devkit.embedding_proxy import Proxy, embedding_proxy

TEXTS = [f"a photo of {i} red blocks and a robot arm" for i in range(60)] + ["", "café crème"]


@pytest.fixture
def proxy(live_server: str) -> Iterator[Proxy]:
    with embedding_proxy(live_server) as found:
        yield found


def embed(source: Path, out: Path, url: str, *extra: str) -> int:
    return main(["embed", str(source), "--out", str(out), "--url", url, "--quiet", *extra])


def texts_file(tmp_path: Path, texts: list[str] = TEXTS) -> Path:
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(texts) + "\n")
    return source


def jsonl_vectors(path: Path) -> np.ndarray:
    lines = path.read_text(encoding="utf-8").split("\n")[:-1]
    return np.asarray([json.loads(line)["embedding"] for line in lines], dtype=np.float32)


def test_four_requests_in_flight_write_the_same_vectors_in_the_same_order_as_one(
    live_server: str, tmp_path: Path, service: EmbeddingService
) -> None:
    source = texts_file(tmp_path)

    assert (
        embed(source, tmp_path / "one.npy", live_server, "--concurrency", "1", "--batch-size", "3")
        == 0
    )
    assert (
        embed(
            source,
            tmp_path / "four.npy",
            f"{live_server}/v1",
            "--concurrency",
            "4",
            "--batch-size",
            "3",
        )
        == 0
    )

    one, four = np.load(tmp_path / "one.npy"), np.load(tmp_path / "four.npy")
    assert one.shape == (len(TEXTS), 32)
    np.testing.assert_array_equal(four, one)
    np.testing.assert_allclose(one, service.embed_texts(TEXTS).vectors, atol=1e-6)
    assert not list(tmp_path.glob("*.partial*"))  # the resume files go once the .npy is written


def test_a_run_stopped_by_a_refusing_server_resumes_with_only_the_rest(
    proxy: Proxy, tmp_path: Path, service: EmbeddingService, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = texts_file(tmp_path), tmp_path / "out.jsonl"
    # GIVEN a frontend that starts refusing after 5 requests
    proxy.refuse_after = 5
    # WHEN the run meets the refusal
    status = embed(source, out, proxy.base, "--concurrency", "4", "--batch-size", "4")
    # THEN it stops with the server's message, what it wrote a whole prefix in input order
    assert status == 1
    err = capsys.readouterr().err
    assert "refused by the test proxy" in err and "run the same command again" in err
    written = len(out.read_text(encoding="utf-8").split("\n")) - 1
    assert 0 < written < len(TEXTS) and written % 4 == 0
    # WHEN the same command runs again, the frontend answering
    proxy.reset()
    assert embed(source, out, proxy.base, "--concurrency", "4", "--batch-size", "4") == 0
    # THEN only the rest reached the server, and the output is the whole input, in order
    assert proxy.forwarded_inputs() == len(TEXTS) - written
    np.testing.assert_allclose(jsonl_vectors(out), service.embed_texts(TEXTS).vectors, atol=1e-6)
    assert [json.loads(line)["text"] for line in out.read_text().split("\n")[:-1]] == TEXTS


def test_a_429_is_retried_after_its_retry_after(proxy: Proxy, tmp_path: Path) -> None:
    # GIVEN a frontend that throttles the first request for one second
    proxy.canned = [(429, {"Retry-After": "1"})]

    status = embed(
        texts_file(tmp_path, TEXTS[:4]), tmp_path / "out.npy", proxy.base, "--concurrency", "1"
    )

    assert status == 0
    first, second = proxy.seen[0], proxy.seen[1]
    assert (first.status, second.status) == (429, 200)
    assert second.at - first.at >= 0.95  # waited for Retry-After, not an immediate retry
    assert np.load(tmp_path / "out.npy").shape == (4, 32)


def test_a_client_error_is_not_retried(proxy: Proxy, tmp_path: Path) -> None:
    proxy.canned = [(401, {})]

    assert embed(texts_file(tmp_path, TEXTS[:4]), tmp_path / "o.npy", proxy.base) == 1
    assert len(proxy.seen) == 1


def test_retries_are_bounded(
    proxy: Proxy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proxy.canned = [(502, {"Retry-After": "0"})] * 3

    status = embed(
        texts_file(tmp_path, TEXTS[:4]), tmp_path / "o.npy", proxy.base, "--max-retries", "2"
    )

    assert status == 1
    assert len(proxy.seen) == 3 and "gave up after 3 attempts" in capsys.readouterr().err


def test_a_server_that_is_down_is_named_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from devkit.servers import free_port

    url = f"http://127.0.0.1:{free_port()}"

    assert embed(texts_file(tmp_path, TEXTS[:2]), tmp_path / "o.npy", url) == 2
    assert "cannot connect" in capsys.readouterr().err


@pytest.mark.slow  # a subprocess killed mid-run, then the rest
def test_a_run_killed_halfway_embeds_only_the_rest_when_started_again(
    proxy: Proxy, tmp_path: Path, service: EmbeddingService
) -> None:
    texts = [f"caption number {i}: a robot arm lifts a red block" for i in range(300)]
    source, out = texts_file(tmp_path, texts), tmp_path / "vectors.npy"
    partial = tmp_path / "vectors.npy.partial"
    row = 4 * 32
    proxy.delay = 0.03  # slow enough to be killed halfway
    command = [sys.executable, "-m", "siglip_text.cli", "embed", str(source), "--out", str(out)]
    command += ["--url", proxy.base, "--concurrency", "2", "--batch-size", "2", "--quiet"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGLIP_")}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not partial.exists() or partial.stat().st_size < 40 * row:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    kept = partial.stat().st_size // row
    assert 40 <= kept < len(texts) and not out.exists()

    proxy.wait_idle()  # the request the kill left in flight is forwarded all the same
    proxy.reset()
    assert embed(source, out, proxy.base, "--concurrency", "2", "--batch-size", "2") == 0

    assert proxy.forwarded_inputs() == len(texts) - kept
    np.testing.assert_allclose(np.load(out), service.embed_texts(texts).vectors, atol=1e-6)
    assert not partial.exists()
