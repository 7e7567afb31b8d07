"""Lambda for the tests: the context object, the event files, gateway events made from a
request, the function built in-process as its init builds it.

Building it reconfigures the package's loggers for good (Powertools'
``copy_config_to_registered_loggers``: its own handlers, ``propagate = False``); the helpers
here put them back, so that later tests see plain `logging` as `siglip-text serve` has it.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from siglip_text.assembly import assemble_lambda
from siglip_text.aws.function import LambdaFunction
from siglip_text.settings import load_settings

from devkit.lambda_context import LambdaContext as LambdaContext  # the tests' name for it
from devkit.paths import EVENTS
from devkit.secrets_manager import in_process_secret

if TYPE_CHECKING:
    from devkit.hostile import Hostile


@contextmanager
def built_lambda(model_dir: Path, **env: str) -> Iterator[LambdaFunction]:
    """The Lambda function as its init builds it (assembly.assemble_lambda), from settings
    for `model_dir` and SIGLIP_* in ``env``; ``env`` (with the defaults here) is also the
    environment the function's own parts read (Powertools, SnapStart's init type)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("SIGLIP_MODEL_DIR", str(model_dir))
    patch.setenv("SIGLIP_ORT_INTRA_OP_THREADS", "1")
    patch.setenv("SIGLIP_AUTH_MODE", "none")
    patch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    patch.setenv("POWERTOOLS_METRICS_NAMESPACE", "SiglipTextTest")
    for name, value in env.items():
        patch.setenv(name, value)
    try:
        with plain_package_loggers():
            yield assemble_lambda(load_settings(), os.environ)
    finally:
        patch.undo()


@contextmanager
def built_lambda_with_key(model_dir: Path, key: str) -> Iterator[LambdaFunction]:
    """`built_lambda` in auth mode api-key, its one key in a secret of moto's in-process
    Secrets Manager."""
    with (
        in_process_secret(key) as (_, arn),
        built_lambda(
            model_dir, SIGLIP_AUTH_MODE="api-key", SIGLIP_API_KEY_SECRET_ARN=arn
        ) as function,
    ):
        yield function


@contextmanager
def plain_package_loggers() -> Iterator[None]:
    """The ``siglip_text`` loggers as plain `logging` has them (no handlers, propagating) for
    the block, and as they were afterwards."""
    loggers = [logging.getLogger("siglip_text")] + [
        logger
        for name, logger in logging.root.manager.loggerDict.items()
        if name.startswith("siglip_text.") and isinstance(logger, logging.Logger)
    ]
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate, lg.disabled) for lg in loggers]
    for logger in loggers:
        logger.handlers, logger.propagate, logger.disabled = [], True, False
        logger.setLevel(logging.NOTSET)
    try:
        yield
    finally:
        for logger, handlers, level, propagate, disabled in saved:
            logger.handlers, logger.propagate, logger.disabled = handlers, propagate, disabled
            logger.setLevel(level)


def event_with_key(key: str, name: str = "rest-embeddings-with-api-key.json") -> dict[str, Any]:
    """The event file ``name`` presenting ``key`` (``Authorization: Bearer <key>``), in its
    headers and, where the event has them (REST v1), its multi-value headers."""
    event = load_event(name)
    value = f"Bearer {key}"
    for field in ("headers", "multiValueHeaders"):
        headers = event.get(field)
        if headers is None:
            continue
        for header in [h for h in headers if h.lower() == "authorization"]:
            del headers[header]
        headers["Authorization"] = [value] if field == "multiValueHeaders" else value
    return event


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event


def gateway_event(
    template: dict[str, Any], request: Hostile, *, base64_body: bool, path: str | None = None
) -> dict[str, Any]:
    """An API Gateway event (REST v1 or HTTP API v2) carrying `request` as API Gateway would.

    A body that is not UTF-8 can only arrive base64-encoded (API Gateway's binary media
    types), so it always is; a UTF-8 one is base64-encoded when `base64_body` says so.
    """
    event: dict[str, Any] = json.loads(json.dumps(template))
    try:
        text: str | None = request.body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or base64_body:
        event["body"], event["isBase64Encoded"] = base64.b64encode(request.body).decode(), True
    else:
        event["body"], event["isBase64Encoded"] = text, False
    headers = {"host": "abc123.execute-api.us-east-1.amazonaws.com", **request.header_dict()}
    # API Gateway passes header values as text; latin-1 bytes arrive as their characters.
    if event.get("version") == "2.0":
        event["headers"] = headers
        if path is not None:
            event["rawPath"] = event["requestContext"]["http"]["path"] = path
    else:
        event["headers"] = headers
        event["multiValueHeaders"] = {k: [v] for k, v in headers.items()}
        if path is not None:
            event["path"] = event["requestContext"]["path"] = path
    return event


def lambda_answer(result: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """Status, lower-cased headers and body bytes of a Lambda proxy response."""
    body = result.get("body") or ""
    content = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode("utf-8")
    headers = {k.lower(): v for k, v in (result.get("headers") or {}).items()}
    for key, values in (result.get("multiValueHeaders") or {}).items():
        headers[key.lower()] = values[-1]
    return result["statusCode"], headers, content


def expected_status(name: str) -> int:
    if "bad-request" in name or "token-ids" in name:  # token ids: refused by default
        return 400
    if "unknown-route" in name:
        return 404
    if "unauthorized" in name:
        return 401
    return 200
