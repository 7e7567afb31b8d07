"""SnapStart and the API key secret, on the real entry point and demo model: a snap-start init
reads no key (it describes the secret), the before-snapshot warm-up uses a key of its own, and
the after-restore read ends, or fails closed, within its deadline even when Secrets Manager
hangs (Lambda allows the runtime and the after-restore hooks 10 s together).

Secrets Manager is moto: in process where it answers, its server on loopback behind a relay
where it must hang (accepts connections, never answers). CRIU's own checkpoint and restore:
test_snapstart_criu.py and test_snapstart_snapshot_memory.py.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from siglip_text.aws.snapstart import KEY_READ_DEADLINE_SECONDS
from siglip_text.engine.errors import ConfigError
from siglip_text.http.errors import KeysUnavailableError

from devkit.aws_lambda import LambdaContext, built_lambda, event_with_key
from devkit.keys import KEY
from devkit.openai_shapes import assert_openai_error
from devkit.secrets_manager import SecretsServer
from devkit.snapstart_emulation import record_secrets_calls, run_after_restore, run_before_snapshot

snapshot_restore_py = pytest.importorskip(
    "snapshot_restore_py", reason="snapshot-restore-py is a runtime dependency"
)

# Test values, not credentials.
SNAP_START = {"AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start", "SIGLIP_AUTH_MODE": "api-key"}
#: Lambda's limit on the runtime and the after-restore hooks together.
LAMBDA_RESTORE_LIMIT_SECONDS = 10.0


@pytest.fixture
def calls() -> Iterator[list[str]]:
    """The Secrets Manager operations called during the test."""
    recorded, stop = record_secrets_calls()
    try:
        yield recorded
    finally:
        stop()


def test_a_snap_start_init_describes_the_secret_and_reads_no_key_until_the_restore(
    demo_dir: Path, registries: Any, calls: list[str], moto_secret: tuple[Any, str]
) -> None:
    client, arn = moto_secret
    calls.clear()
    # GIVEN a snap-start init and its before-snapshot hooks (the warm-up request included)
    with built_lambda(demo_dir, **SNAP_START, SIGLIP_API_KEY_SECRET_ARN=arn) as function:
        run_before_snapshot()
        # THEN the secret was described, never read, and no key is held
        assert calls == ["DescribeSecret"]
        assert function.parts.authenticator._digests == ()
        # WHEN the environment is restored: THEN the keys are read, and the key is accepted
        run_after_restore()
        assert calls == ["DescribeSecret", "GetSecretValue"]
        assert function.handler(event_with_key(KEY), LambdaContext())["statusCode"] == 200


def test_an_on_demand_init_still_reads_the_keys_at_init(
    demo_dir: Path, calls: list[str], moto_secret: tuple[Any, str]
) -> None:
    client, arn = moto_secret
    calls.clear()
    env = {"SIGLIP_AUTH_MODE": "api-key", "SIGLIP_API_KEY_SECRET_ARN": arn}
    with built_lambda(demo_dir, **env) as function:
        assert calls == ["GetSecretValue"]
        assert function.handler(event_with_key(KEY), LambdaContext())["statusCode"] == 200


@pytest.mark.parametrize("state", ["missing", "scheduled for deletion"])
def test_a_snap_start_init_fails_on_a_secret_it_cannot_use(
    demo_dir: Path, registries: Any, moto_secret: tuple[Any, str], state: str
) -> None:
    client, arn = moto_secret
    if state == "missing":
        client.delete_secret(SecretId=arn, ForceDeleteWithoutRecovery=True)
    else:
        client.delete_secret(SecretId=arn, RecoveryWindowInDays=7)
    with (
        pytest.raises(ConfigError, match="API_KEY_SECRET_ARN") as raised,
        built_lambda(demo_dir, **SNAP_START, SIGLIP_API_KEY_SECRET_ARN=arn),
    ):
        pass
    assert KEY not in str(raised.value)


def test_the_warm_up_key_is_valid_only_during_the_warm_up(
    demo_dir: Path, registries: Any, moto_secret: tuple[Any, str]
) -> None:
    client, arn = moto_secret
    with built_lambda(demo_dir, **SNAP_START, SIGLIP_API_KEY_SECRET_ARN=arn) as function:
        # GIVEN the key the warm-up request presents (seen on its way into the app)
        presented: list[str] = []
        handler = function.snapstart.asgi_handler

        def watching(event: dict[str, Any], context: Any) -> dict[str, Any]:
            presented.append(event["headers"]["authorization"].removeprefix("Bearer "))
            result: dict[str, Any] = handler(event, context)
            return result

        function.snapstart.asgi_handler = watching
        run_before_snapshot()
        (warm_up_key,) = presented
        assert warm_up_key != KEY and len(warm_up_key) >= 32
        # WHEN the environment is restored: THEN the warm-up key is refused, the real one not
        run_after_restore()
        assert function.handler(event_with_key(warm_up_key), LambdaContext())["statusCode"] == 401
        assert function.handler(event_with_key(KEY), LambdaContext())["statusCode"] == 200


# --- Secrets Manager hanging at the restore ----------------------------------------------------


def timed_after_restore(bound: float) -> tuple[float, BaseException | None]:
    """Run the after-restore hooks as the runtime does, in a thread: how long they took and
    what they raised. Fails the test if they are still running after `bound` seconds."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            run_after_restore()
        except BaseException as exc:  # the test reads it
            outcome.append(exc)
        else:
            outcome.append(None)

    began = time.perf_counter()
    hooks = threading.Thread(target=run, daemon=True)
    hooks.start()
    hooks.join(bound)
    elapsed = time.perf_counter() - began
    assert not hooks.is_alive(), f"the after-restore hooks were still running after {bound} s"
    return elapsed, outcome[0]


@pytest.mark.slow  # waits out the deadline (3 s)
@pytest.mark.parametrize("trickle", [False, True], ids=["never-answers", "trickles"])
def test_a_restore_fails_closed_within_its_deadline_while_secrets_manager_hangs(
    demo_dir: Path, registries: Any, secrets: SecretsServer, trickle: bool
) -> None:
    env = {**SNAP_START, "SIGLIP_API_KEY_SECRET_ARN": secrets.arn}
    with built_lambda(demo_dir, **env) as function:
        run_before_snapshot()
        # GIVEN a Secrets Manager that accepts connections and never answers, or answers one
        # byte at a time (each byte restarts the client's read timeout)
        secrets.relay.down(trickle=trickle)
        # WHEN the environment is restored
        elapsed, raised = timed_after_restore(LAMBDA_RESTORE_LIMIT_SECONDS - 2)
        print(f"\nafter-restore hooks, Secrets Manager hanging ({trickle=}): {elapsed:.2f} s")
        # THEN the hooks failed closed at the deadline, well inside Lambda's 10 s, after the
        # read reached the hung endpoint
        assert isinstance(raised, KeysUnavailableError), raised
        assert secrets.relay.hung >= 1
        assert KEY_READ_DEADLINE_SECONDS <= elapsed < LAMBDA_RESTORE_LIMIT_SECONDS - 4, elapsed
        # AND nothing is served: every request is refused in OpenAI's shape
        refused = function.handler(event_with_key(KEY), LambdaContext())
        assert refused["statusCode"] == 500
        assert_openai_error(json.loads(refused["body"]))
        # WHEN Secrets Manager answers again and another restore runs: THEN it serves
        secrets.relay.restore()
        run_after_restore()
        assert function.handler(event_with_key(KEY), LambdaContext())["statusCode"] == 200
