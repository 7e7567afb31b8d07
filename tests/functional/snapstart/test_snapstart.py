"""SnapStart: the hooks the init registers, run as the runtime client runs them, on the real
demo model; Secrets Manager is moto (in process, or its server on loopback where the function
runs in its own process, so that the search for secrets searches only the function).

tests/functional/snapstart/test_snapstart_criu.py checkpoints and restores the process itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from siglip_text.aws import sizing
from siglip_text.aws.snapstart import NOT_RESTORED
from siglip_text.http.errors import KeysUnavailableError

from devkit.aws_lambda import LambdaContext, built_lambda, event_with_key, load_event
from devkit.keys import KEY, NEW_KEY
from devkit.openai_shapes import assert_openai_error
from devkit.secrets_manager import secrets_client
from devkit.snapstart_emulation import (
    api_key_env,
    function_process,
    mask,
    run_after_restore,
    run_before_snapshot,
)

snapshot_restore_py = pytest.importorskip(
    "snapshot_restore_py", reason="snapshot-restore-py is a runtime dependency"
)

# Test values, not credentials.
EMBED = "rest-embeddings-with-api-key.json"


def counting_reads(function: ModuleType, reads: list[str]) -> None:
    function.parts.authenticator.provider.client.meta.events.register(
        "before-parameter-build.secrets-manager.GetSecretValue",
        lambda **kwargs: reads.append(kwargs["params"]["SecretId"]),
    )


def test_a_snap_start_init_registers_a_before_snapshot_and_an_after_restore_hook(
    demo_dir: Path, registries: tuple[list[Any], list[Any]]
) -> None:
    before, after = registries
    with built_lambda(demo_dir) as function:
        assert function.snapstart is None
        assert before == [] and after == []
    with built_lambda(demo_dir, AWS_LAMBDA_INITIALIZATION_TYPE="snap-start") as function:
        assert [call[0] for call in before] == [function.snapstart.before_snapshot]
        assert [call[0] for call in after] == [function.snapstart.after_restore]


def test_after_restore_the_keys_are_read_again_and_a_request_with_the_key_is_answered(
    demo_dir: Path,
    registries: tuple[list[Any], list[Any]],
    moto_secret: tuple[Any, str],
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, arn = moto_secret
    reads: list[str] = []
    env = {
        "AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start",
        "SIGLIP_AUTH_MODE": "api-key",
        "SIGLIP_API_KEY_SECRET_ARN": arn,
    }
    with built_lambda(demo_dir, **env) as function:
        counting_reads(function, reads)
        authenticator = function.parts.authenticator
        # GIVEN the snapshot taken: no key held, every request refused until a restore
        run_before_snapshot()
        assert authenticator.provider.store == {}
        refused = function.handler(event_with_key(KEY), LambdaContext())
        assert refused["statusCode"] == 500
        assert_openai_error(json.loads(refused["body"]))
        assert reads == []
        # WHEN it is restored (the runtime runs the after-restore hooks)
        capsys.readouterr()
        run_after_restore()
        # THEN the secret was read again, and the key is accepted, a wrong one refused
        assert reads == [arn]
        answered = function.handler(event_with_key(KEY), LambdaContext())
        assert answered["statusCode"] == 200, answered["body"]
        assert len(json.loads(answered["body"])["data"]) == 1
        assert function.handler(event_with_key(NEW_KEY), LambdaContext())["statusCode"] == 401
        # AND the restore was logged and counted, and the first request is a cold start
        assert "restored from a snapshot" in caplog.messages
        out = capsys.readouterr().out
        metrics = [json.loads(line) for line in out.splitlines() if '"_aws"' in line]
        names = {
            m["Name"] for doc in metrics for m in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        }
        assert {"ColdStart", "SnapStartRestores"} <= names, names


def test_a_restore_fails_closed_when_the_secret_cannot_be_read(
    demo_dir: Path, registries: tuple[list[Any], list[Any]], moto_secret: tuple[Any, str]
) -> None:
    client, arn = moto_secret
    env = {
        "AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start",
        "SIGLIP_AUTH_MODE": "api-key",
        "SIGLIP_API_KEY_SECRET_ARN": arn,
    }
    with built_lambda(demo_dir, **env) as function:
        run_before_snapshot()
        client.delete_secret(SecretId=arn, ForceDeleteWithoutRecovery=True)
        with pytest.raises(KeysUnavailableError):
            run_after_restore()
        assert function.handler(event_with_key(KEY), LambdaContext())["statusCode"] == 500


def test_another_hosts_arithmetic_fails_the_restore_and_nothing_is_served(
    demo_dir: Path, registries: tuple[list[Any], list[Any]]
) -> None:
    with built_lambda(demo_dir, AWS_LAMBDA_INITIALIZATION_TYPE="snap-start") as function:
        event = load_event("rest-embeddings-text.json")
        assert function.handler(event, LambdaContext())["statusCode"] == 200
        run_before_snapshot()
        # GIVEN a restoring host whose ONNX Runtime computes other vectors than the snapshot's
        session = function.parts.service.encoder.session
        run = session.run
        session.run = lambda *args, **kwargs: [out[..., ::-1] for out in run(*args, **kwargs)]
        # WHEN the runtime restores: THEN the restore fails
        with pytest.raises(Exception, match="computes different vectors"):
            run_after_restore()
        assert function.snapstart.refusal != NOT_RESTORED
        # AND every request is refused, none answered with a vector
        for name in ("rest-embeddings-text.json", "rest-embeddings-batch.json", "rest-health.json"):
            result = function.handler(load_event(name), LambdaContext())
            assert result["statusCode"] == 500, (name, result["body"])
            body = json.loads(result["body"])
            assert_openai_error(body)
            assert "data" not in body


def test_after_restore_the_thread_count_is_detected_again(
    demo_dir: Path, registries: tuple[list[Any], list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    with built_lambda(demo_dir, AWS_LAMBDA_INITIALIZATION_TYPE="snap-start") as function:
        service = function.parts.service
        assert service.intra_op_threads == 1
        run_before_snapshot()
        # GIVEN settings that leave the thread count to the host, and a restoring host that
        # gives the function another CPU allowance
        snapstart = function.snapstart
        unset = snapstart.settings.model_copy(update={"ort_intra_op_threads": None})
        monkeypatch.setattr(snapstart, "settings", unset)
        monkeypatch.setattr(sizing, "usable_cpus", lambda **_: 2)
        run_after_restore()
        # THEN the session was rebuilt for it, and serves
        assert service.intra_op_threads == 2
        assert service.encoder.intra_op_threads == 2
        event = load_event("rest-embeddings-text.json")
        assert function.handler(event, LambdaContext())["statusCode"] == 200


# --- in its own process, Secrets Manager on loopback ------------------------------------------


@pytest.mark.slow  # searches every object of the function's process: seconds
def test_after_the_before_snapshot_hooks_no_key_nor_digest_is_reachable(
    demo_dir: Path, moto_server: str, tmp_path: Path
) -> None:
    client = secrets_client(moto_server)
    rotating = json.dumps({"keys": [NEW_KEY, KEY]})
    arn = client.create_secret(Name=f"siglip-text/{tmp_path.name}", SecretString=rotating)["ARN"]
    with function_process(api_key_env(demo_dir, moto_server, arn), tmp_path) as function:
        assert function.call("hooks") == {"before": 1, "after": 1}
        assert function.invoke(event_with_key(KEY))["statusCode"] == 200
        # GIVEN an initialized function that has served a request with a key: the search
        # finds both keys (as text) and their digests, so it can find them
        masked = [mask(KEY), mask(NEW_KEY)]  # needles: [bytes, str, digest] per key
        found = set(function.call("reachable", masked=masked)["found"])
        assert {1, 2, 4, 5} <= found, found
        # WHEN the runtime runs the before-snapshot hooks
        assert function.call("before_snapshot") == {"ok": True}
        # THEN no key, as text or bytes, nor any key's digest is reachable in the process
        assert function.call("reachable", masked=masked) == {"found": []}
        # AND after a restore the key is read again and accepted (the request before the
        # hooks made the first read: a snap-start init reads none)
        assert function.call("after_restore") == {"ok": True}
        assert function.call("reads") == {"reads": 2}
        assert function.invoke(event_with_key(NEW_KEY))["statusCode"] == 200
