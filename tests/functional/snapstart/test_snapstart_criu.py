"""A real restore, emulated: CRIU checkpoints an initialized function process after the
before-snapshot hooks and restores it, twice from one image, as Lambda restores one snapshot in
many environments (../shared/CONTRACT.md section 7: Debian trixie's criu 4.1 on this kernel).

Each restored copy runs the after-restore hooks as the runtime client does, then answers
through the Lambda handler with the real demo model; Secrets Manager is moto's server on
loopback (outside the checkpointed process). Skips, naming why, where CRIU cannot run (no
criu root: scripts/make_criu_root.sh, which .ci/run runs; not root; a kernel criu rejects).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from devkit import snapstart_emulation as emulated
from devkit.aws_lambda import event_with_key
from devkit.keys import KEY, NEW_KEY
from devkit.secrets_manager import secrets_client

pytestmark = [pytest.mark.slow, pytest.mark.emulation]


def vectors(result: dict[str, Any]) -> np.ndarray:
    assert result["statusCode"] == 200, result["body"]
    return np.array([item["embedding"] for item in json.loads(result["body"])["data"]])


def test_a_checkpointed_function_restores_answers_the_same_and_reads_the_rotated_key(
    criu: None, demo_dir: Path, moto_server: str, tmp_path: Path
) -> None:
    client = secrets_client(moto_server)
    arn = client.create_secret(Name=f"siglip-text/{tmp_path.name}", SecretString=KEY)["ARN"]
    env = emulated.api_key_env(demo_dir, moto_server, arn)
    function = emulated.FunctionProcess(env, tmp_path)
    images = tmp_path / "images"
    restorer = None
    try:
        # GIVEN an initialized function, its answer, and the before-snapshot hooks run
        function.start()
        expected = vectors(function.invoke(event_with_key(KEY, "rest-embeddings-batch.json")))
        assert function.call("before_snapshot") == {"ok": True}
        reads = function.call("reads")["reads"]  # the request's, before the snapshot
        # WHEN it is checkpointed (the process ends) and restored from the image
        began = time.perf_counter()
        emulated.criu_dump(function.pid, images)
        dumped_s = time.perf_counter() - began
        for key, refused in ((KEY, NEW_KEY), (NEW_KEY, KEY)):
            began = time.perf_counter()
            restorer = emulated.criu_restore(images)
            restored_s = time.perf_counter() - began
            # THEN the restored copy holds no key until its after-restore hooks read it
            assert function.call("reads") == {"reads": reads}
            assert function.call("after_restore") == {"ok": True}
            assert function.call("reads") == {"reads": reads + 1}
            # AND it answers the same vectors with the secret's current key, and refuses
            # the other
            np.testing.assert_allclose(
                vectors(function.invoke(event_with_key(key, "rest-embeddings-batch.json"))),
                expected,
                atol=1e-6,
            )
            assert (
                function.invoke(event_with_key(refused, "rest-embeddings-batch.json"))["statusCode"]
                == 401
            )
            function.stop()
            restorer.wait(timeout=60)
            restorer = None
            print(f"criu: dump {dumped_s:.2f} s, restore {restored_s:.2f} s")
            # the next copy is restored after the key was replaced in Secrets Manager
            client.put_secret_value(SecretId=arn, SecretString=NEW_KEY)
    finally:
        function.stop()
        if restorer is not None:
            restorer.kill()
            restorer.wait(timeout=60)
        emulated.wait_gone(function.pid)
