"""Query text and API keys never reach logs, metrics or traces; error messages never echo input.

A unique marker text goes through every path, successes and errors, in-process with the
`siglip-text serve` observer and through the Lambda handler (Powertools Logger at DEBUG, EMF
metrics, X-Ray subsegments caught by a UDP listener standing in for the X-Ray daemon). Turning
on ``SIGLIP_LOG_INPUTS`` makes the marker appear, which shows that each check can fail.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.http.observability import LoggingObserver
from siglip_text.settings import load_settings

from devkit.asgi import asgi_call
from devkit.aws_lambda import plain_package_loggers
from devkit.graphs import broken_service
from devkit.openai_shapes import assert_openai_error
from devkit.paths import EVENTS, ROOT
from devkit.processes import python

URL = "/v1/embeddings"
MARKER = "zebra-quokka-7f3a91-private-query"
KEY = "sk-siglip-privacy-key-4c1d9e7a55b2"
WRONG_KEY = "sk-siglip-wrong-key-b6e0f2a83d17"


def marker_requests() -> list[tuple[str, dict[str, Any], int]]:
    """(name, body, expected status) for every path a query text can take through the app."""
    return [
        ("one text", {"input": f"a photo of {MARKER}"}, 200),
        ("batch, base64", {"input": ["a cat", MARKER], "encoding_format": "base64"}, 200),
        ("long text", {"input": f"{MARKER} " * 2000}, 200),
        ("wrong item type", {"input": [MARKER, 3]}, 400),
        ("lone surrogate", {"input": [f"{MARKER}\ud800"]}, 400),
        ("empty text", {"input": [MARKER, ""]}, 200),
        ("empty token array", {"input": [MARKER, []]}, 400),
        ("wrong dimensions", {"input": MARKER, "dimensions": 7}, 400),
        ("other model", {"input": MARKER, "model": "text-embedding-3-small"}, 404),
        ("too many inputs", {"input": [MARKER] * 3}, 413),
        ("body too large", {"input": MARKER * 10_000}, 413),
    ]


def small_settings(**overrides: Any) -> Any:
    return load_settings(max_inputs_per_request=2, max_request_bytes=200_000, **overrides)


def send_all(client: TestClient) -> None:
    for name, body, status in marker_requests():
        raw = json.dumps(body).encode()
        response = client.post(URL, content=raw, headers={"content-type": "application/json"})
        assert response.status_code == status, (name, response.text)
        assert MARKER not in response.text or status == 200, name  # errors never echo input


def overload_with_marker(service: EmbeddingService, **settings: Any) -> list[int]:
    app = create_app(
        service,
        load_settings(max_concurrent_requests=1, max_pending_requests=0, **settings),
        observer=LoggingObserver(),
    )
    texts = [f"{MARKER} {i} " * 10 for i in range(256)]

    async def burst() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            responses = await asyncio.gather(
                *(client.post(URL, json={"input": texts}) for _ in range(4))
            )
        return [r.status_code for r in responses]

    return asyncio.run(burst())


@pytest.fixture(autouse=True)
def _plain_logging() -> Iterator[None]:
    # Earlier tests imported the Lambda module in-process, which rewires the package's loggers
    with plain_package_loggers():
        yield


def test_query_text_never_logged_in_server_mode(
    service: EmbeddingService, tmp_path: Path, caplog: Any, capsys: Any
) -> None:
    # GIVEN every logger at DEBUG and the observer `siglip-text serve` uses
    caplog.set_level(logging.DEBUG)
    with TestClient(create_app(service, small_settings(), observer=LoggingObserver())) as client:
        # WHEN the marker goes through successes, 400, 404 and 413
        send_all(client)
    # AND through a 429 and a 500 (a model returning NaN)
    assert 429 in overload_with_marker(service)
    with TestClient(create_app(broken_service(service, tmp_path), observer=LoggingObserver())) as c:
        assert c.post(URL, json={"input": MARKER}).status_code == 500
    # THEN it is in no log record, no log argument, and not on stdout or stderr
    captured = capsys.readouterr()
    messages = [record.getMessage() for record in caplog.records]
    assert any(m.startswith("embedded") for m in messages), "the check would be vacuous"
    assert any(m.startswith("request failed status=500") for m in messages), messages
    for record in caplog.records:
        assert MARKER not in record.getMessage() and MARKER not in repr(record.__dict__)
    assert MARKER not in captured.out + captured.err


def test_log_inputs_flag_does_log_query_text_in_server_mode(
    service: EmbeddingService, caplog: Any
) -> None:
    # GIVEN SIGLIP_LOG_INPUTS=true (debugging only), and the plain log format of `serve`
    caplog.set_level(logging.DEBUG)
    settings = small_settings(log_inputs=True)
    with TestClient(create_app(service, settings, observer=LoggingObserver())) as client:
        assert client.post(URL, json={"input": ["a cat", MARKER]}).status_code == 200
    # THEN the marker is in the log text itself: the flag works, so the check above can fail
    assert MARKER in caplog.text


def test_error_messages_echo_at_most_a_short_escaped_prefix(
    service: EmbeddingService, settings: Any
) -> None:
    app = create_app(service, settings)
    long_marker = (MARKER + "\x1b[31m\u202e") * 400  # 10+ kB, a terminal escape, an RTL mark
    headers = {"content-type": "application/json"}
    cases: list[tuple[str, bytes, str, str]] = [
        ("model", json.dumps({"input": "x", "model": long_marker}).encode(), "POST", URL),
        (
            "encoding_format",
            json.dumps({"input": "x", "encoding_format": long_marker}).encode(),
            "POST",
            URL,
        ),
        ("dimensions", json.dumps({"input": "x", "dimensions": long_marker}).encode(), "POST", URL),
        ("user", json.dumps({"input": "x", "user": [long_marker]}).encode(), "POST", URL),
        ("invalid utf-8", MARKER.encode() + b"\xff\xfe" + long_marker.encode(), "POST", URL),
        ("token id", b'{"input": [1, %d]}' % (2**200), "POST", URL),
        ("path", b"", "GET", "/v1/" + long_marker),
        ("method", b"", long_marker.replace("\u202e", "").replace("\x1b", ""), URL),
        ("method, unknown path", b"", "X" * 10_000, "/nothing"),
    ]
    for name, body, method, path in cases:
        status, _, content = asgi_call(app, body, headers, method=method, path=path)
        error = json.loads(content)
        assert 400 <= status < 500, (name, status)
        assert_openai_error(error)
        message = error["error"]["message"]
        # THEN the message is short, printable ASCII, and holds at most a prefix of the input
        assert len(message) <= 250 and message.isascii() and message.isprintable(), (name, message)
        assert long_marker[:200] not in message and "\x1b" not in message, name
        if name == "model":
            assert MARKER in message and "\\x1b[31m" in message  # a short prefix, escaped


# --- the Lambda handler, in a subprocess: everything it prints and sends ---------------------

LAMBDA_SCRIPT = """
import base64, json, os, sys
sys.path.insert(0, {root!r})
auth = os.environ.get("SIGLIP_AUTH_MODE") == "api-key"
if auth:
    from moto import mock_aws
    mock_aws().start()
    import boto3
    client = boto3.client("secretsmanager", region_name="us-east-1")
    os.environ["SIGLIP_API_KEY_SECRET_ARN"] = client.create_secret(
        Name="siglip-text/api-key", SecretString={key!r})["ARN"]
import siglip_text.lambda_function as lf
from devkit.aws_lambda import LambdaContext
requests = json.load(open({requests!r}))

rest = json.load(open({events!r} + "/rest-embeddings-text.json"))
http = json.load(open({events!r} + "/http-embeddings-text.json"))
statuses = []
for i, (name, body, status) in enumerate(requests):
    event = json.loads(json.dumps(rest if i % 2 else http))
    raw = json.dumps(body)
    if i % 3 == 0:
        event["body"], event["isBase64Encoded"] = base64.b64encode(raw.encode()).decode(), True
    else:
        event["body"] = raw
    if auth:
        event["headers"]["Authorization"] = "Bearer " + ({key!r} if i % 2 else {wrong!r})
        event.get("multiValueHeaders", {{}}).pop("Authorization", None)
    statuses.append(lf.handler(event, LambdaContext())["statusCode"])
print("STATUSES", json.dumps(statuses))
"""


def run_lambda(tmp: Path, **env_changes: str) -> tuple[list[int], str, str]:
    """Run the handler over `marker_requests` in a fresh process; its statuses, output, traces."""
    requests = tmp / "requests.json"
    requests.write_text(json.dumps(marker_requests()))
    daemon = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    daemon.bind(("127.0.0.1", 0))
    daemon.settimeout(0.5)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIGLIP_", "POWERTOOLS_"))}
    env.update(
        SIGLIP_MODEL_DIR=str(ROOT / "handler" / "siglip_text" / "demo"),
        SIGLIP_AUTH_MODE="none",
        SIGLIP_ORT_INTRA_OP_THREADS="1",
        SIGLIP_MAX_INPUTS_PER_REQUEST="2",
        SIGLIP_MAX_REQUEST_BYTES="200000",
        POWERTOOLS_LOG_LEVEL="DEBUG",
        POWERTOOLS_TRACE_DISABLED="false",
        POWERTOOLS_METRICS_NAMESPACE="SiglipTextTest",
        # The X-Ray SDK in Lambda mode, sending subsegments to our stand-in daemon
        AWS_XRAY_DAEMON_ADDRESS=f"127.0.0.1:{daemon.getsockname()[1]}",
        AWS_XRAY_CONTEXT_MISSING="LOG_ERROR",
        LAMBDA_TASK_ROOT="/var/task",
        AWS_LAMBDA_FUNCTION_NAME="siglip-text",
        AWS_DEFAULT_REGION="us-east-1",
        _X_AMZN_TRACE_ID="Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
    )
    env.update(env_changes)
    script = LAMBDA_SCRIPT.format(
        root=str(ROOT),
        events=str(EVENTS),
        key=KEY,
        wrong=WRONG_KEY,
        requests=str(requests),
    )
    with daemon:
        done = python("-c", script, env=env, timeout=180, check=False)
        traces = []
        while True:
            try:
                traces.append(daemon.recv(65536).decode("utf-8", "replace"))
            except TimeoutError:
                break
    assert done.returncode == 0, done.stderr[-3000:]
    statuses = json.loads(done.stdout.rsplit("STATUSES ", 1)[1])
    return statuses, done.stdout + done.stderr, "\n".join(traces)


@pytest.mark.slow
def test_query_text_and_keys_never_in_lambda_logs_metrics_or_traces(tmp_path: Path) -> None:
    # WHEN the marker goes through every path of the handler, auth on, logs at DEBUG
    statuses, output, traces = run_lambda(tmp_path, SIGLIP_AUTH_MODE="api-key")
    expected = [s if i % 2 else 401 for i, (_, _, s) in enumerate(marker_requests())]
    assert statuses == expected
    # THEN logs, EMF metrics and traces were written, and none holds the marker or a key
    assert "EmbeddingLatency" in output and "request failed" in output and "DEBUG" in output
    assert "## _invoke" in traces, traces[:500]
    for secret in (MARKER, KEY, WRONG_KEY, KEY[-12:], WRONG_KEY[-12:]):
        assert secret not in output, secret
        assert secret not in traces, secret


@pytest.mark.slow
def test_log_inputs_flag_does_log_query_text_through_the_lambda_handler(tmp_path: Path) -> None:
    statuses, output, traces = run_lambda(tmp_path, SIGLIP_LOG_INPUTS="true")
    assert statuses == [s for _, _, s in marker_requests()]
    assert MARKER in output  # the capture sees query text when it is logged
    assert MARKER not in traces
