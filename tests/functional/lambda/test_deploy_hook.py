"""The pre-traffic hook (handler/deploy_hook/pre_traffic.py) against the real function.

The new version is the real Lambda entry point on a demo bundle (with the ``self_check``
records export writes, or without them as the demo ships), invoked in-process (moto cannot run
an image function); the hook is imported as Lambda imports it from its zip, never the
siglip_text package. CodeDeploy is boto3's own client with botocore's Stubber, which checks
each call against CodeDeploy's API model (moto 5.2 has no
PutLifecycleEventHookExecutionStatus); Secrets Manager is moto's.
"""

from __future__ import annotations

import ast
import io
import json
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from moto import mock_aws
from siglip_text.engine.service import PROBE_TEXT
from siglip_text.settings import load_service, load_settings
from siglip_text.tools.export.checks import probe_reference, record_self_check

from devkit.aws_lambda import LambdaContext, built_lambda
from devkit.deploy_hook import HOOK_DIRECTORY, load_hook

hook_module = load_hook()

LIFECYCLE_EVENT = {
    "DeploymentId": "d-EXAMPLE123",
    "LifecycleEventHookExecutionId": "eyJhbGciOiJIUzI1NiJ9.example-hook-execution-id",
}
KEY = "hook-test-key-0123456789abcdef"
FINGERPRINT = "sha256:" + "5e" * 32
Invoke = Callable[[dict[str, Any]], dict[str, Any]]


def with_manifest(source: Path, target: Path, **changes: Any) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    manifest = json.loads((target / "manifest.json").read_text())
    manifest.update(changes)
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return target


@pytest.fixture(scope="module")
def recorded_bundle(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo bundle with the ``self_check`` export records (the fp32 graph's vector)."""
    service = load_service(load_settings(model_dir=demo_dir, ort_intra_op_threads=1))
    check = record_self_check(service, probe_reference(service))
    target = tmp_path_factory.mktemp("recorded") / "bundle"
    return with_manifest(demo_dir, target, self_check=check.model_dump(mode="json"))


@pytest.fixture(scope="module")
def new_version(recorded_bundle: Path) -> Iterator[ModuleType]:
    with built_lambda(recorded_bundle) as module:
        yield module


def invoker(module: ModuleType, sent: list[dict[str, Any]] | None = None) -> Invoke:
    """The new version, invoked as Lambda does: JSON in, the handler, JSON out."""

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        if sent is not None:
            sent.append(event)
        result = module.handler(json.loads(json.dumps(event)), LambdaContext())
        answer: dict[str, Any] = json.loads(json.dumps(result))
        return answer

    return invoke


def altered(invoke: Invoke, path: str, change: Callable[[dict[str, Any]], None]) -> Invoke:
    """The version's answers, with `change` applied to the JSON body it answers on `path`."""

    def answer(event: dict[str, Any]) -> dict[str, Any]:
        response = invoke(event)
        if event["path"] == path and response.get("statusCode") == 200:
            body = json.loads(response["body"])
            change(body)
            response = {**response, "body": json.dumps(body)}
        return response

    return answer


def run(invoke: Invoke, expected: str, *, secrets: Any = None, **environ: str) -> dict[str, str]:
    """Run the hook on the new version; CodeDeploy must get `expected`."""
    codedeploy = boto3.client("codedeploy", region_name="us-east-1")
    with Stubber(codedeploy) as stub:
        stub.add_response(
            "put_lifecycle_event_hook_execution_status",
            {"lifecycleEventHookExecutionId": LIFECYCLE_EVENT["LifecycleEventHookExecutionId"]},
            {
                "deploymentId": LIFECYCLE_EVENT["DeploymentId"],
                "lifecycleEventHookExecutionId": LIFECYCLE_EVENT["LifecycleEventHookExecutionId"],
                "status": expected,
            },
        )
        reported: dict[str, str] = hook_module.run_hook(
            dict(LIFECYCLE_EVENT),
            invoke=invoke,
            codedeploy=codedeploy,
            secrets=secrets,
            environ={"SIGLIP_AUTH_MODE": "none", **environ},
        )
        stub.assert_no_pending_responses()
    assert reported["status"] == expected, reported
    return reported


# --- the probe and its reference, from the version itself --------------------------------------


def test_a_new_version_that_computes_its_export_reference_passes(new_version: ModuleType) -> None:
    sent: list[dict[str, Any]] = []
    reported = run(invoker(new_version, sent), "Succeeded")
    assert "cosine to the export reference" in reported["report"]
    # AND the text it embedded is the one the version's init probes (the hook keeps no copy)
    (probe,) = [json.loads(e["body"]) for e in sent if e["path"] == "/v1/embeddings"]
    assert probe["input"] == PROBE_TEXT
    assert not hasattr(hook_module, "PROBE_TEXT")


def test_health_with_probe_serves_the_reference_export_recorded_and_its_bound(
    new_version: ModuleType, recorded_bundle: Path, demo_dir: Path
) -> None:
    event = hook_module.gateway_event("GET", "/health", query={"probe": "true"})
    body = json.loads(invoker(new_version)(event)["body"])
    recorded = json.loads((recorded_bundle / "manifest.json").read_text())["self_check"]
    assert body["probe"] == {
        "text": PROBE_TEXT,
        "reference": pytest.approx(recorded["reference"]),
        "min_cosine": recorded["min_cosine"],
    }
    # AND without the parameter /health is what it was: the model's identity only
    plain = json.loads(invoker(new_version)(hook_module.gateway_event("GET", "/health"))["body"])
    assert "probe" not in plain
    # AND a bundle that records no reference says so
    with built_lambda(demo_dir) as demo:
        body = json.loads(invoker(demo)(event)["body"])
    assert body["probe"] == {"text": PROBE_TEXT, "reference": None, "min_cosine": None}


def test_a_new_version_whose_answer_misses_its_reference_fails(new_version: ModuleType) -> None:
    # GIVEN a version whose /v1 path answers another vector than its init computed (the
    # vector rotated: still finite and of unit length)
    def rotate(body: dict[str, Any]) -> None:
        vector = body["data"][0]["embedding"]
        body["data"][0]["embedding"] = vector[1:] + vector[:1]

    reported = run(altered(invoker(new_version), "/v1/embeddings", rotate), "Failed")
    assert "below the bound" in reported["report"]


def test_the_demo_bundle_without_a_reference_passes_so_a_demo_canary_does_not_roll_back(
    demo_dir: Path,
) -> None:
    # GIVEN the demo bundle as it ships (no self_check): a default canary's second deploy
    with built_lambda(demo_dir) as module:
        reported = run(invoker(module), "Succeeded")
    # THEN it passes, saying what it could not compare
    assert "records no export reference" in reported["report"]


def test_a_new_version_that_errors_fails_the_deploy() -> None:
    # the new version's init failed: Lambda answers the invoke with a function error
    client = boto3.client("lambda", region_name="us-east-1")
    with Stubber(client) as lambda_stub:
        payload = b'{"errorType": "Runtime.ExitError", "errorMessage": "init failed"}'
        lambda_stub.add_response(
            "invoke",
            {
                "StatusCode": 200,
                "FunctionError": "Unhandled",
                "Payload": StreamingBody(io.BytesIO(payload), len(payload)),
            },
        )
        target = "arn:aws:lambda:us-east-1:123456789012:function:siglip-text:7"
        reported = run(hook_module.lambda_invoker(client, target), "Failed")
    assert "Unhandled" in reported["report"]


def test_a_hook_without_its_target_fails_instead_of_hanging_the_deploy() -> None:
    client = boto3.client("lambda", region_name="us-east-1")
    reported = run(hook_module.lambda_invoker(client, ""), "Failed")
    assert "SIGLIP_HOOK_TARGET_FUNCTION" in reported["report"]


def test_a_version_older_than_the_probe_fails_with_the_reason(new_version: ModuleType) -> None:
    reported = run(
        altered(invoker(new_version), "/health", lambda body: body.pop("probe")), "Failed"
    )
    assert "did not name the model and its probe" in reported["report"]


# --- the index's fingerprint --------------------------------------------------------------------


def fingerprinted(invoke: Invoke, fingerprint: str | None) -> Invoke:
    """The version's answers with its /health reporting `fingerprint` (None: no field), as a
    version does that computes its contract fingerprint."""

    def change(body: dict[str, Any]) -> None:
        body.pop("fingerprint", None)
        if fingerprint is not None:
            body["fingerprint"] = fingerprint

    return altered(invoke, "/health", change)


def test_a_version_with_the_indexs_fingerprint_passes(new_version: ModuleType) -> None:
    invoke = fingerprinted(invoker(new_version), FINGERPRINT)
    reported = run(invoke, "Succeeded", SIGLIP_HOOK_FINGERPRINT=FINGERPRINT)
    assert FINGERPRINT in reported["report"]


@pytest.mark.parametrize("served", ["sha256:" + "0" * 64, None])
def test_a_version_with_another_fingerprint_or_none_is_refused(
    new_version: ModuleType, served: str | None
) -> None:
    invoke = fingerprinted(invoker(new_version), served)
    reported = run(invoke, "Failed", SIGLIP_HOOK_FINGERPRINT=FINGERPRINT)
    assert "the index was built with" in reported["report"]
    assert FINGERPRINT in reported["report"]


def test_without_a_fingerprint_to_check_any_fingerprint_passes(new_version: ModuleType) -> None:
    invoke = fingerprinted(invoker(new_version), "sha256:" + "0" * 64)
    run(invoke, "Succeeded", SIGLIP_HOOK_FINGERPRINT="")


# --- auth mode api-key: the key, and the refusals ----------------------------------------------


@pytest.fixture
def key_secret(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        secrets = boto3.client("secretsmanager", region_name="us-east-1")
        arn = secrets.create_secret(Name="siglip-text/api-key", SecretString=KEY)["ARN"]
        yield secrets, arn


def test_under_api_key_the_new_version_must_refuse_a_missing_and_a_wrong_key(
    recorded_bundle: Path, key_secret: tuple[Any, str]
) -> None:
    secrets, arn = key_secret
    auth = {"SIGLIP_AUTH_MODE": "api-key", "SIGLIP_API_KEY_SECRET_ARN": arn}
    # GIVEN a new version that takes the key (its init reads the same secret)
    sent: list[dict[str, Any]] = []
    with built_lambda(recorded_bundle, **auth) as module:
        # WHEN the hook runs with the function's auth settings
        reported = run(invoker(module, sent), "Succeeded", secrets=secrets, **auth)
    # THEN it sent /v1 a request without a key and one with a wrong key (both refused),
    # then the probe with the key, which passed
    keys = [e["headers"].get("Authorization") for e in sent if e["path"] == "/v1/embeddings"]
    assert keys[0] is None and keys[1] not in (None, f"Bearer {KEY}")
    assert keys[2] == f"Bearer {KEY}"
    assert "refuses a missing and a wrong key" in reported["report"]
    assert KEY not in reported["report"]


def test_a_new_version_whose_v1_is_open_is_refused_under_api_key(
    recorded_bundle: Path, key_secret: tuple[Any, str]
) -> None:
    secrets, arn = key_secret
    # GIVEN a new version that checks no key (deployed with its auth off by mistake)
    with built_lambda(recorded_bundle, SIGLIP_AUTH_MODE="none") as module:
        # WHEN the hook of an api-key stack checks it
        reported = run(
            invoker(module),
            "Failed",
            secrets=secrets,
            SIGLIP_AUTH_MODE="api-key",
            SIGLIP_API_KEY_SECRET_ARN=arn,
        )
    # THEN the deploy fails before any traffic shifts, saying why
    assert "without a key with 200, not 401" in reported["report"]


def test_the_hook_reads_the_first_key_of_a_rotation(key_secret: tuple[Any, str]) -> None:
    secrets, arn = key_secret
    secrets.put_secret_value(SecretId=arn, SecretString='{"keys": ["new-key-012345678901", "old"]}')
    environ = {"SIGLIP_AUTH_MODE": "api-key", "SIGLIP_API_KEY_SECRET_ARN": arn}
    assert hook_module.read_api_key(environ, secrets) == "new-key-012345678901"
    assert hook_module.read_api_key({"SIGLIP_AUTH_MODE": "none"}, secrets) is None


# --- what the zip holds ---------------------------------------------------------------------


def test_the_hook_is_one_module_of_the_standard_library_and_the_runtimes_boto3() -> None:
    # GIVEN the hook's directory (its Makefile is the build: it copies the one module)
    files = sorted(p.name for p in HOOK_DIRECTORY.iterdir() if p.name != "__pycache__")
    assert files == ["Makefile", "pre_traffic.py"]
    tree = ast.parse((HOOK_DIRECTORY / "pre_traffic.py").read_text())
    imported = {
        (node.module or "").split(".")[0] if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    imported = {name.split(".")[0] for name in imported}
    # THEN it imports nothing but the standard library and what Lambda's runtime provides
    assert imported - set(sys.stdlib_module_names) <= {"boto3", "botocore", "__future__"}
    assert "siglip_text" not in imported
