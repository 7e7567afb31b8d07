"""CodeDeploy's pre-traffic hook for siglip-text: ``pre_traffic.handler``.

A gradual deploy (SAM ``DeploymentPreference`` with ``Hooks: PreTraffic``) publishes the new
version, runs this hook, and shifts traffic only if the hook reports ``Succeeded`` with
``PutLifecycleEventHookExecutionStatus``. The hook is a zip function of this one module on
Lambda's Python runtime: the standard library and the boto3 the runtime provides, never the
1 GB function image. It cannot import the function's package, so the new version itself tells
it what to expect: ``GET /health?probe=true`` answers, beside the model's identity, the text
its init probes, the reference vector export recorded for it and the bound init holds it to
(the bundle's manifest, read by the version that serves it).

It invokes the new version (its ARN in ``SIGLIP_HOOK_TARGET_FUNCTION``) with REST API events,
as API Gateway would:

1. ``GET /health?probe=true``: a 200 naming a model, a revision and a dimension; with
   ``SIGLIP_HOOK_FINGERPRINT`` set (the fingerprint the operator's index was built with), the
   version's ``fingerprint`` must be that one.
2. Under ``SIGLIP_AUTH_MODE=api-key``: ``POST /v1/embeddings`` without a key, then with a
   wrong one, must each be refused with 401, so that a version whose ``/v1`` is open never
   takes traffic.
3. ``POST /v1/embeddings`` of the probe text (with a key from the function's secret under
   api-key): one finite unit vector of the version's dimension, whose cosine to the recorded
   reference reaches the recorded bound. A bundle that records no reference (the demo
   bundle) is checked without the cosine, and the report says so.

Any other outcome, including an error of the hook itself, reports ``Failed``, and CodeDeploy
rolls back.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import secrets as random_tokens
from collections.abc import Callable, Mapping
from typing import Any

logger = logging.getLogger("siglip_text.deploy_hook")
logger.setLevel(logging.INFO)

TARGET_ENV = "SIGLIP_HOOK_TARGET_FUNCTION"
AUTH_MODE_ENV = "SIGLIP_AUTH_MODE"
SECRET_ENV = "SIGLIP_API_KEY_SECRET_ARN"
FINGERPRINT_ENV = "SIGLIP_HOOK_FINGERPRINT"
#: The unit-length tolerance of a served vector (float32 rounding is far below it).
NORM_TOLERANCE = 1e-3

#: One invocation of the new version: an API Gateway event in, its proxy response out.
Invoke = Callable[[dict[str, Any]], dict[str, Any]]


class HookCheckFailed(Exception):
    """Raised when the new version does not answer as a version that may take traffic must."""


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
    environ: Mapping[str, str] = os.environ,
) -> dict[str, str]:
    """Check the new version and report the verdict to CodeDeploy; returns what it reported."""
    try:
        api_key = read_api_key(environ, secrets)
        expected = environ.get(FINGERPRINT_ENV, "").strip()
        report = check_new_version(invoke, api_key=api_key, fingerprint=expected)
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


def read_api_key(environ: Mapping[str, str], secrets: Any | None) -> str | None:
    """A key the new version must accept under auth mode api-key (the first of the secret:
    a plain key, or ``{"keys": ["<new>", "<old>"]}`` during a rotation); None otherwise."""
    if environ.get(AUTH_MODE_ENV, "none") != "api-key":
        return None
    arn = environ.get(SECRET_ENV, "")
    if not arn:
        raise HookCheckFailed(f"{SECRET_ENV} is not set (auth mode api-key)")
    if secrets is None:
        import boto3

        secrets = boto3.client("secretsmanager")
    value = str(secrets.get_secret_value(SecretId=arn)["SecretString"]).strip()
    if value.startswith("{"):
        keys = json.loads(value).get("keys") or [""]
        value = str(keys[0]).strip()
    if not value:
        raise HookCheckFailed("the API key secret holds no key")
    return value


def check_new_version(invoke: Invoke, *, api_key: str | None, fingerprint: str) -> str:
    """The checks of the module docstring; raises `HookCheckFailed`, returns a summary."""
    health = _answer(invoke(gateway_event("GET", "/health", query={"probe": "true"})), "health")
    try:
        model, revision = str(health["model"]), str(health["revision"])
        dimension = int(health["embedding_dimension"])
        probe = health["probe"]
        text = str(probe["text"])
    except (KeyError, TypeError, ValueError) as exc:
        raise HookCheckFailed(
            f"GET /health?probe=true did not name the model and its probe ({exc!r}): a "
            "version older than this hook, or not siglip-text"
        ) from None
    served = f"{model}@{revision}"
    if fingerprint and health.get("fingerprint") != fingerprint:
        raise HookCheckFailed(
            f"the new version ({served}) reports contract fingerprint "
            f"{health.get('fingerprint')!r}, the index was built with {fingerprint!r}: its "
            "vectors would not match the index"
        )

    request = {"input": text, "encoding_format": "float"}
    if api_key is not None:
        wrong = "siglip-hook-not-a-key-" + random_tokens.token_hex(16)
        for what, authorization in (("without a key", None), ("with a wrong key", wrong)):
            response = invoke(gateway_event("POST", "/v1/embeddings", request, authorization))
            if response.get("statusCode") != 401:
                raise HookCheckFailed(
                    f"the new version answered POST /v1/embeddings {what} with "
                    f"{response.get('statusCode')}, not 401: its /v1 must refuse it"
                )
    body = _answer(invoke(gateway_event("POST", "/v1/embeddings", request, api_key)), "embed")
    vector = _one_unit_vector(body, dimension)

    reference, bound = probe.get("reference"), probe.get("min_cosine")
    if reference is None or bound is None:
        return (
            f"{served} answers; its bundle records no export reference for the probe, so "
            "its vector was not compared"
        )
    reference = [float(x) for x in reference]
    if len(reference) != dimension:
        raise HookCheckFailed(
            f"the recorded reference has {len(reference)} values, the model's vectors {dimension}"
        )
    reference_norm = math.sqrt(math.fsum(x * x for x in reference))
    cosine = math.fsum(a * b for a, b in zip(vector, reference, strict=True)) / reference_norm
    if cosine < float(bound):
        raise HookCheckFailed(
            f"the probe's vector from {served} has cosine {cosine:.6f} to the reference "
            f"recorded at export, below the bound {bound}"
        )
    fingerprint_note = f", fingerprint {fingerprint}" if fingerprint else ""
    return (
        f"{served}{fingerprint_note}: the probe's cosine to the export reference is "
        f"{cosine:.6f} (bound {bound})"
        + ("; /v1 refuses a missing and a wrong key" if api_key is not None else "")
    )


def _one_unit_vector(body: dict[str, Any], dimension: int) -> list[float]:
    try:
        (item,) = body["data"]
        vector = [float(x) for x in item["embedding"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise HookCheckFailed(f"the embeddings answer is not one vector ({exc!r})") from None
    finite = all(map(math.isfinite, vector))
    if len(vector) != dimension or not finite:
        raise HookCheckFailed(
            f"the probe's vector has {len(vector)} values (finite: {finite}), the model's "
            f"dimension is {dimension}"
        )
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if abs(norm - 1.0) > NORM_TOLERANCE:
        raise HookCheckFailed(f"the probe's vector has norm {norm:.6f}, not 1")
    return vector


def _answer(response: dict[str, Any], what: str) -> dict[str, Any]:
    """The JSON body of a 200 proxy response; anything else fails the check."""
    status = response.get("statusCode")
    body = response.get("body") or ""
    if response.get("isBase64Encoded"):
        body = base64.b64decode(body).decode("utf-8", "replace")
    if status != 200:
        raise HookCheckFailed(f"the {what} request answered {status}: {body[:300]}")
    try:
        parsed: dict[str, Any] = json.loads(body)
    except ValueError:
        raise HookCheckFailed(f"the {what} request answered a body that is not JSON") from None
    return parsed


def gateway_event(
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    api_key: str | None = None,
    *,
    query: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A REST API (v1) proxy event, as API Gateway sends the function a request."""
    headers = {"Host": "pre-traffic-hook", "User-Agent": "siglip-text-deploy-hook"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {name: [value] for name, value in headers.items()},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": (
            {name: [value] for name, value in query.items()} if query else None
        ),
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": path,
            "httpMethod": method,
            "path": path,
            "stage": "pre-traffic",
            "requestId": "pre-traffic-hook",
            "identity": {"sourceIp": "127.0.0.1", "userAgent": headers["User-Agent"]},
        },
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }
