"""A real restore, emulated with CRIU, while Secrets Manager hangs: the restored process's
after-restore hooks must end, failing closed, well inside the 10 s Lambda allows the runtime
and the hooks together (Lambda Developer Guide, "Lambda SnapStart runtime hooks for Python").

One checkpoint of an initialized snap-start function (api-key auth; Secrets Manager is moto's
server on loopback behind a relay in this process), restored several times from one image:
with the relay accepting and never answering, with it answering one byte at a time, and with
it up. Prints each restore's time and its hooks' time. Skips, naming why, where CRIU cannot
run.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from devkit import snapstart_emulation as emulated
from devkit.aws_lambda import event_with_key
from devkit.keys import KEY
from devkit.secrets_manager import SecretsServer

pytestmark = [pytest.mark.slow, pytest.mark.emulation]

#: Lambda's limit on the runtime and the after-restore hooks together.
LAMBDA_RESTORE_LIMIT_SECONDS = 10.0


def test_a_restored_function_fails_closed_within_seconds_while_secrets_manager_hangs(
    criu: None, demo_dir: Path, secrets: SecretsServer, tmp_path: Path
) -> None:
    env = emulated.api_key_env(demo_dir, secrets.relay.url, secrets.arn)
    event = event_with_key(KEY)
    function = emulated.FunctionProcess(env, tmp_path)
    images = tmp_path / "images"
    restorer: subprocess.Popen[bytes] | None = None
    figures = []
    try:
        # GIVEN an initialized snap-start function, checkpointed after its before-snapshot hooks
        function.start()
        assert function.call("before_snapshot") == {"ok": True}
        emulated.criu_dump(function.pid, images)
        for state in ("never answers", "trickles", "never answers", "trickles", "answers"):
            # WHEN it is restored while Secrets Manager is in that state
            if state == "answers":
                secrets.relay.restore()
            else:
                secrets.relay.down(trickle=state == "trickles")
            began = time.perf_counter()
            restorer = emulated.criu_restore(images)
            restored_s = time.perf_counter() - began
            hooks = function.call("timed_after_restore")
            status = function.invoke(event)["statusCode"]
            figures.append((state, restored_s, hooks["seconds"], hooks["error"], status))
            function.stop()
            restorer.wait(timeout=60)
            restorer = None
            # THEN the hooks ended well inside Lambda's limit: failing closed (every request
            # refused) while Secrets Manager hangs, serving once it answers
            assert hooks["seconds"] < LAMBDA_RESTORE_LIMIT_SECONDS - 4, (state, hooks)
            if state == "answers":
                assert hooks["error"] is None and status == 200, (hooks, status)
            else:
                assert (hooks["error"] or "").startswith("KeysUnavailableError"), hooks
                assert status == 500
    finally:
        print()
        for state, restored_s, hooks_s, error, status in figures:
            print(
                f"Secrets Manager {state}: criu restore {restored_s:.2f} s, after-restore "
                f"hooks {hooks_s:.2f} s ({(error or 'passed').split(':')[0]}), request {status}"
            )
        function.stop()
        if restorer is not None:
            restorer.kill()
            restorer.wait(timeout=60)
        emulated.wait_gone(function.pid)
