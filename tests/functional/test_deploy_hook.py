"""The pre-traffic hook (deploy_hook.py) against the real function: the new version is the
real Lambda entry point on a demo bundle whose manifest records the probe's reference as
export records it, invoked in-process (moto cannot run an image function); CodeDeploy is
boto3's own client with botocore's Stubber, which checks each call against CodeDeploy's API
model (moto 5.2 has no PutLifecycleEventHookExecutionStatus)."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from moto import mock_aws
from siglip_text.aws.deploy_hook import PROBE_TEXT, gateway_event, lambda_invoker, run_hook
from siglip_text.engine.config import load_settings
from siglip_text.engine.loading import load_service
from siglip_text.engine.service import PROBE_TEXT as SERVICE_PROBE_TEXT
from siglip_text.tools.export.checks import probe_reference, record_self_check

from tests.support.aws_lambda import LambdaContext, imported_lambda

LIFECYCLE_EVENT = {
    "DeploymentId": "d-EXAMPLE123",
    "LifecycleEventHookExecutionId": "eyJhbGciOiJIUzI1NiJ9.example-hook-execution-id",
}


def with_manifest(source: Path, target: Path, **changes: Any) -> Path:
    shutil.copytree(source, target)
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
    with imported_lambda(recorded_bundle) as module:
        yield module


def invoker(module: ModuleType) -> Any:
    """The new version, invoked as Lambda does: JSON in, the handler, JSON out."""

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        result = module.handler(json.loads(json.dumps(event)), LambdaContext())
        answer: dict[str, Any] = json.loads(json.dumps(result))
        return answer

    return invoke


def hook(
    monkeypatch: pytest.MonkeyPatch, bundle: Path, invoke: Any, expected: str, **env: str
) -> dict[str, str]:
    """Run the hook with the image's bundle at ``bundle``; CodeDeploy must get ``expected``."""
    monkeypatch.setenv("SIGLIP_MODEL_DIR", str(bundle))
    monkeypatch.setenv("SIGLIP_AUTH_MODE", "none")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
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
        reported = run_hook(dict(LIFECYCLE_EVENT), invoke=invoke, codedeploy=codedeploy)
        stub.assert_no_pending_responses()
    assert reported["status"] == expected, reported
    return reported


def test_a_new_version_that_computes_the_export_reference_passes(
    new_version: ModuleType, recorded_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reported = hook(monkeypatch, recorded_bundle, invoker(new_version), "Succeeded")
    assert "cosine to the export reference" in reported["report"]


def test_a_new_version_whose_vector_misses_the_reference_fails(
    new_version: ModuleType, recorded_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the image's manifest records another vector than the one the new version computes
    check = json.loads((recorded_bundle / "manifest.json").read_text())["self_check"]
    check["reference"] = check["reference"][1:] + check["reference"][:1]
    image = with_manifest(recorded_bundle, tmp_path / "image", self_check=check)
    reported = hook(monkeypatch, image, invoker(new_version), "Failed")
    assert "below the bound" in reported["report"]


def test_a_new_version_serving_another_bundle_fails(
    new_version: ModuleType, recorded_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = with_manifest(recorded_bundle, tmp_path / "image", revision="f" * 40)
    reported = hook(monkeypatch, image, invoker(new_version), "Failed")
    assert "the new version serves" in reported["report"]


def test_a_new_version_that_errors_fails_the_deploy(
    recorded_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
        reported = hook(monkeypatch, recorded_bundle, lambda_invoker(client, target), "Failed")
    assert "Unhandled" in reported["report"]


def test_a_hook_without_its_target_fails_instead_of_hanging_the_deploy(
    recorded_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = boto3.client("lambda", region_name="us-east-1")
    reported = hook(monkeypatch, recorded_bundle, lambda_invoker(client, ""), "Failed")
    assert "SIGLIP_HOOK_TARGET_FUNCTION" in reported["report"]


def test_a_bundle_without_a_reference_fails_unless_allowed(
    demo_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with imported_lambda(demo_dir) as module:
        refused = hook(monkeypatch, demo_dir, invoker(module), "Failed")
        allowed = hook(
            monkeypatch,
            demo_dir,
            invoker(module),
            "Succeeded",
            SIGLIP_HOOK_REQUIRE_REFERENCE="false",
        )
    assert "records no reference" in refused["report"]
    assert "no reference recorded" in allowed["report"]


def test_the_hook_sends_the_events_api_gateway_sends() -> None:
    event = gateway_event("POST", "/v1/embeddings", {"input": "x"}, "Bearer k" * 3)
    assert event["httpMethod"] == "POST" and event["path"] == "/v1/embeddings"
    assert json.loads(event["body"]) == {"input": "x"}
    assert event["multiValueHeaders"]["Authorization"] == ["Bearer k" * 3]
    assert PROBE_TEXT == SERVICE_PROBE_TEXT


def test_under_api_key_auth_the_hook_sends_a_key_from_the_functions_secret(
    recorded_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "hook-test-key-0123456789abcdef"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        secrets = boto3.client("secretsmanager", region_name="us-east-1")
        arn = secrets.create_secret(Name="siglip-text/api-key", SecretString=key)["ARN"]
        auth = {"SIGLIP_AUTH_MODE": "api-key", "SIGLIP_API_KEY_SECRET_ARN": arn}
        # GIVEN a new version that takes the key (its init reads the same secret)
        with imported_lambda(recorded_bundle, **auth) as module:
            # WHEN the hook runs with the function's auth settings
            monkeypatch.setenv("SIGLIP_MODEL_DIR", str(recorded_bundle))
            for name, value in auth.items():
                monkeypatch.setenv(name, value)
            codedeploy = boto3.client("codedeploy", region_name="us-east-1")
            with Stubber(codedeploy) as stub:
                stub.add_response(
                    "put_lifecycle_event_hook_execution_status",
                    {},
                    {
                        "deploymentId": LIFECYCLE_EVENT["DeploymentId"],
                        "lifecycleEventHookExecutionId": LIFECYCLE_EVENT[
                            "LifecycleEventHookExecutionId"
                        ],
                        "status": "Succeeded",
                    },
                )
                reported = run_hook(
                    dict(LIFECYCLE_EVENT),
                    invoke=invoker(module),
                    codedeploy=codedeploy,
                    secrets=secrets,
                )
            # AND the new version refuses a request without the key
            bare = invoker(module)(gateway_event("POST", "/v1/embeddings", {"input": "x"}, None))
    # THEN the hook passed, with the key the version requires
    assert reported["status"] == "Succeeded", reported
    assert bare["statusCode"] == 401
    assert key not in reported["report"]
