"""`siglip-text serve --api-key-file F`: a key without AWS, as a user runs it (a real `serve`
process on loopback, the demo model, a real file)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from siglip_text.cli import main

from devkit.servers import running_server

KEY = "sk-siglip-file-key-0123456789abcdef"
ADDED_KEY = "sk-siglip-file-key-added-fedcba987"
BODY = {"input": ["a red block"]}


def post(base: str, key: str | None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(f"{base}/v1/embeddings", json=BODY, headers=headers, timeout=30).status_code


@pytest.mark.slow  # a server process: a few seconds to start
def test_serve_with_a_key_file_answers_401_without_the_key_and_picks_up_an_added_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a private key file with one key and a short check period
    keys = tmp_path / "api-keys"
    keys.write_text(f"# keys for this server, one per line\n{KEY}\n")
    keys.chmod(0o600)
    with running_server(
        args=["--api-key-file", str(keys)], SIGLIP_API_KEY_FILE_CHECK_SECONDS="0.2"
    ) as server:
        # THEN /v1 needs the key, /health does not
        assert (post(server.base, None), post(server.base, "sk-wrong-key-0123456789")) == (401, 401)
        assert post(server.base, KEY) == 200
        assert httpx.get(f"{server.base}/health", timeout=10).status_code == 200
        # WHEN a key is added to the file, the server still running
        with keys.open("a") as handle:
            handle.write(ADDED_KEY + "\n")
        # THEN it works within the check period (polled: no fixed sleep)
        deadline = time.monotonic() + 10
        while post(server.base, ADDED_KEY) != 200:
            assert time.monotonic() < deadline, "the added key was not picked up"
            time.sleep(0.1)
        assert post(server.base, KEY) == 200
        assert server.process.poll() is None  # the same process: no restart
        # AND the client tools send the key of SIGLIP_API_KEY, the one name they all read
        monkeypatch.setenv("SIGLIP_API_KEY", ADDED_KEY)
        (tmp_path / "texts.txt").write_text("a red block\na robot arm\n")
        command = ["embed", str(tmp_path / "texts.txt"), "--out", str(tmp_path / "v.npy")]
        assert main([*command, "--url", f"{server.base}/v1", "--quiet"]) == 0
        report = tmp_path / "load.json"
        load = ["load-test", "--url", server.base, "--requests", "3", "--warmup", "0"]
        assert main([*load, "--concurrency", "1", "--json", str(report)]) == 0
        assert json.loads(report.read_text())["statuses"] == {"200": 3}
        assert KEY not in server.stderr() and ADDED_KEY not in server.stderr()


@pytest.mark.slow  # a server process loading the model before it refuses
def test_serve_refuses_to_start_with_a_key_file_others_can_read(tmp_path: Path) -> None:
    keys = tmp_path / "api-keys"
    keys.write_text(KEY + "\n")
    keys.chmod(0o644)

    done = subprocess.run(
        [sys.executable, "-m", "siglip_text.cli", "serve", "--demo", "--api-key-file", str(keys)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "SIGLIP_ORT_INTRA_OP_THREADS": "1"},
    )

    assert done.returncode == 1
    assert f"chmod 600 {keys}" in done.stderr
    assert KEY not in done.stderr + done.stdout
