"""CodeDeploy's pre-traffic hook: ``siglip_text.aws.deploy_hook.handler``.

A gradual deploy (SAM ``DeploymentPreference`` with ``Hooks: PreTraffic``) publishes the new
version, runs this hook, and shifts traffic only if the hook reports ``Succeeded`` with
``PutLifecycleEventHookExecutionStatus``. The hook invokes the new version (its ARN in
``SIGLIP_HOOK_TARGET_FUNCTION``, ``!Ref <Function>.Version`` in the template) with API
Gateway events, as the API would:

1. ``GET /health``: a 200 that names this image's bundle (model, revision, dimension);
2. ``POST /v1/embeddings`` of the manifest's probe text (``self_check.text``): one finite
   unit vector of the manifest's dimension, whose cosine to the reference recorded at export
   (``self_check.reference``) reaches ``self_check.min_cosine``, the bound init itself holds.

Any other outcome, including an error of the hook itself, reports ``Failed`` and CodeDeploy
rolls back. A bundle that records no reference fails too, unless
``SIGLIP_HOOK_REQUIRE_REFERENCE=false`` (then steps 1 and 2 run without the cosine).

It runs from the function's own image with another handler, so it reads the same manifest
(``SIGLIP_MODEL_DIR``) and never loads the model: boto3, the manifest reader and plain
arithmetic. Under ``SIGLIP_AUTH_MODE=api-key`` it reads a key from the function's secret.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable
from typing import Any

from ..engine.bundle import Manifest, load_manifest
from ..engine.config import ENV_PREFIX, load_settings
from ..http.auth import parse_keys
from .events import rest_proxy_event

logger = logging.getLogger("siglip_text.aws.deploy_hook")
logger.setLevel(logging.INFO)

TARGET_ENV = "SIGLIP_HOOK_TARGET_FUNCTION"
#: service.PROBE_TEXT, for a bundle that records none (service imports ONNX Runtime).
PROBE_TEXT = "a photo of a cat"
REQUIRE_REFERENCE_ENV = "SIGLIP_HOOK_REQUIRE_REFERENCE"

#: One invocation of the new version: an API Gateway event in, its proxy response out.
Invoke = Callable[[dict[str, Any]], dict[str, Any]]


class HookCheckFailed(Exception):
    """The new version did not answer as its bundle says it must."""


def handler(event: dict[str, Any], context: Any) -> dict[str, str]:
    """CodeDeploy's lifecycle event -> checks -> PutLifecycleEventHookExecutionStatus."""
    import boto3
    from botocore.config import Config

    seconds = max(10.0, context.get_remaining_time_in_millis() / 1000.0 - 5.0)
    client = boto3.client(
        "lambda", config=Config(read_timeout=seconds, retries={"mode": "standard"})
    )
    return run_hook(
        event,
        invoke=lambda_invoker(client, os.environ.get(TARGET_ENV, "")),
        codedeploy=boto3.client("codedeploy"),
    )


def run_hook(
    event: dict[str, Any],
    *,
    invoke: Invoke,
    codedeploy: Any,
    secrets: Any | None = None,
) -> dict[str, str]:
    """Check the new version and report the verdict to CodeDeploy; returns what it reported."""
    try:
        report = check_new_version(invoke, load_bundle_manifest(), authorization(secrets))
        status = "Succeeded"
    except HookCheckFailed as failed:
        status, report = "Failed", str(failed)
    except Exception as exc:  # the hook's own fault fails the deploy too, never hangs it
        logger.exception("pre-traffic hook error")
        status, report = "Failed", f"the hook could not run its checks ({type(exc).__name__})"
    log = logger.info if status == "Succeeded" else logger.error
    log("pre-traffic check %s: %s", status, report)
    codedeploy.put_lifecycle_event_hook_execution_status(
        deploymentId=event["DeploymentId"],
        lifecycleEventHookExecutionId=event["LifecycleEventHookExecutionId"],
        status=status,
    )
    return {"status": status, "report": report}


def lambda_invoker(client: Any, function: str) -> Invoke:
    """Invoke ``function`` (the new version's ARN) synchronously with an event."""

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        if not function:
            raise HookCheckFailed(f"{TARGET_ENV} is not set: no new version to check")
        answer = client.invoke(
            FunctionName=function,
            InvocationType="RequestResponse",
            Payload=json.dumps(event).encode(),
        )
        payload = answer["Payload"].read()
        if answer.get("FunctionError"):
            raise HookCheckFailed(
                f"the new version failed ({answer['FunctionError']}): {payload[:300]!r}"
            )
        result: dict[str, Any] = json.loads(payload)
        return result

    return invoke


def load_bundle_manifest() -> Manifest:
    """The manifest of the bundle in this image (the settings the function reads)."""
    return load_manifest(load_settings().artifact_paths().manifest)


def authorization(secrets: Any | None) -> str | None:
    """``Bearer <key>`` under auth mode api-key (a key from the function's secret)."""
    settings = load_settings()
    if settings.auth_mode != "api-key":
        return None
    if secrets is None:
        import boto3

        secrets = boto3.client("secretsmanager")
    if not settings.api_key_secret_arn:
        raise HookCheckFailed(f"{ENV_PREFIX}API_KEY_SECRET_ARN is not set (auth mode api-key)")
    value = secrets.get_secret_value(SecretId=settings.api_key_secret_arn)["SecretString"]
    return f"Bearer {parse_keys(value)[0]}"


def check_new_version(invoke: Invoke, manifest: Manifest, authorization: str | None) -> str:
    """The two checks of the module docstring; raises `HookCheckFailed`, returns a summary."""
    health = _answer(invoke(gateway_event("GET", "/health", None, None)), "GET /health")
    served = (health.get("model"), health.get("revision"), health.get("embedding_dimension"))
    expected = (manifest.repository, manifest.revision, manifest.embedding_dimension)
    if served != expected:
        raise HookCheckFailed(f"the new version serves {served}, this image's bundle is {expected}")

    recorded = manifest.self_check
    text = recorded.text if recorded is not None else PROBE_TEXT
    request = {"input": text, "encoding_format": "float"}
    body = _answer(
        invoke(gateway_event("POST", "/v1/embeddings", request, authorization)),
        "POST /v1/embeddings",
    )
    try:
        (item,) = body["data"]
        vector = [float(x) for x in item["embedding"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise HookCheckFailed(f"the embeddings answer is not one vector ({exc!r})") from None
    if len(vector) != manifest.embedding_dimension or not all(map(math.isfinite, vector)):
        raise HookCheckFailed(
            f"the probe's vector has {len(vector)} values (finite: "
            f"{all(map(math.isfinite, vector))}), the bundle's dimension is "
            f"{manifest.embedding_dimension}"
        )
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if abs(norm - 1.0) > 1e-3:
        raise HookCheckFailed(f"the probe's vector has norm {norm:.6f}, not 1")

    if recorded is None:
        if os.environ.get(REQUIRE_REFERENCE_ENV, "true").strip().lower() in ("0", "false"):
            return f"{expected[0]}@{expected[1]} answers (no reference recorded to compare)"
        raise HookCheckFailed(
            "the bundle records no reference vector (manifest self_check), so the new "
            "version's vectors cannot be checked; re-export the bundle, or set "
            f"{REQUIRE_REFERENCE_ENV}=false"
        )
    reference = recorded.reference
    if len(reference) != len(vector):
        raise HookCheckFailed(
            f"the recorded reference has {len(reference)} values, the vector {len(vector)}"
        )
    reference_norm = math.sqrt(math.fsum(x * x for x in reference))
    cosine = math.fsum(a * b for a, b in zip(vector, reference, strict=True)) / reference_norm
    if cosine < recorded.min_cosine:
        raise HookCheckFailed(
            f"the probe's vector has cosine {cosine:.6f} to the reference recorded at export, "
            f"below the bound {recorded.min_cosine}"
        )
    return (
        f"{expected[0]}@{expected[1]}: the probe's cosine to the export reference is "
        f"{cosine:.6f} (bound {recorded.min_cosine})"
    )


def _answer(response: dict[str, Any], what: str) -> dict[str, Any]:
    """The JSON body of a 200 proxy response; anything else fails the check."""
    status = response.get("statusCode")
    body = response.get("body") or ""
    if response.get("isBase64Encoded"):
        import base64

        body = base64.b64decode(body).decode("utf-8", "replace")
    if status != 200:
        raise HookCheckFailed(f"{what} answered {status}: {body[:300]}")
    try:
        parsed: dict[str, Any] = json.loads(body)
    except ValueError:
        raise HookCheckFailed(f"{what} answered a body that is not JSON") from None
    return parsed


def gateway_event(
    method: str, path: str, body: dict[str, Any] | None, authorization: str | None
) -> dict[str, Any]:
    """A REST API (v1) proxy event, as API Gateway sends the function a request."""
    headers = {"Host": "pre-traffic-hook", "User-Agent": "siglip-text-deploy-hook"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    if authorization is not None:
        headers["Authorization"] = authorization
    return rest_proxy_event(
        method,
        path,
        headers=headers,
        body=json.dumps(body) if body is not None else None,
        stage="pre-traffic",
        request_id="pre-traffic-hook",
    )
