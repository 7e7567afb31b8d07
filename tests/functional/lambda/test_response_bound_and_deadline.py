"""Requests that fit: an answer over the frontend's response limit is refused before the model
runs, and a request that cannot finish in the invocation's remaining time stops with an
OpenAI-shaped 413 instead of a Lambda timeout. Through the real Lambda handler, on the demo
bundle and on the demo widened to a base tower's 768 dimensions (devkit/wide_bundle.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from openai import APIStatusError, AsyncOpenAI
from siglip_text.http.app import create_app
from siglip_text.http.response_size import LAMBDA_RESPONSE_LIMIT_BYTES, inputs_that_fit
from siglip_text.settings import load_service, load_settings

from devkit.asgi import asgi_call
from devkit.aws_lambda import LambdaContext, built_lambda, lambda_answer, load_event
from devkit.openai_shapes import assert_openai_error, assert_openai_response, decode_base64
from devkit.wide_bundle import widen_demo_bundle

TEXTS = [f"a photo of object number {i}" for i in range(1000)]


@dataclass
class ScriptedContext(LambdaContext):
    """A Lambda context whose remaining time is read from a script, one value per call (the
    last repeats): the invocation's clock as the function sees it between chunks."""

    remaining: list[int] = field(default_factory=lambda: [30_000])
    calls: int = 0

    def get_remaining_time_in_millis(self) -> int:
        self.calls += 1
        return self.remaining[min(self.calls, len(self.remaining)) - 1]


@pytest.fixture(scope="module")
def wide_dir(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return widen_demo_bundle(demo_dir, tmp_path_factory.mktemp("wide") / "bundle", dimension=768)


@pytest.fixture(scope="module")
def wide_lambda(wide_dir: Path) -> Iterator[ModuleType]:
    with built_lambda(wide_dir, SIGLIP_MAX_INPUTS_PER_REQUEST="2048") as module:
        yield module


def embeddings_event(body: dict[str, Any]) -> dict[str, Any]:
    event = load_event("rest-embeddings-text.json")
    event["body"], event["isBase64Encoded"] = json.dumps(body), False
    return event


def counting_model_runs(module: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows given to the real ONNX session, counted as they pass through to it."""
    encoder = module.parts.service.encoder
    run: Callable[..., Any] = encoder._run
    rows: list[int] = []

    def counted(ids: Any) -> Any:
        rows.append(len(ids))
        return run(ids)

    monkeypatch.setattr(encoder, "_run", counted)
    return rows


@pytest.mark.slow  # a 768-d graph answers 1,000 inputs
def test_1000_float_vectors_of_768_d_are_refused_at_once_and_as_base64_answered(
    wide_lambda: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = counting_model_runs(wide_lambda, monkeypatch)
    # GIVEN 1,000 texts for a 768-d model behind Lambda's 6 MB response limit
    started = time.perf_counter()
    refused = wide_lambda.handler(
        embeddings_event({"input": TEXTS, "encoding_format": "float"}), LambdaContext()
    )
    elapsed = time.perf_counter() - started
    # THEN as float JSON they are a 413 in OpenAI's shape, before the model ran
    status, _, body = lambda_answer(refused)
    error = json.loads(body)
    assert status == 413, body[:300]
    assert_openai_error(error)
    assert error["error"]["code"] == "response_too_large"
    assert error["error"]["param"] == "input"
    service = wide_lambda.parts.service
    fits = {
        encoding: inputs_that_fit(
            LAMBDA_RESPONSE_LIMIT_BYTES,
            dimension=768,
            encoding=encoding,
            model=service.model_id,
            max_tokens=service.max_tokens,
        )
        for encoding in ("float", "base64")
    }
    assert fits["float"] < 1000 < fits["base64"]
    assert (
        f"send at most {fits['float']} inputs per request as 'float' or {fits['base64']} as "
        "'base64'" in error["error"]["message"]
    )
    assert rows == []
    assert elapsed < 1.0  # a generous sanity bound: nothing was computed

    # AND the same request as base64 is answered, within the 6 MB the frontend returns
    answered = wide_lambda.handler(
        embeddings_event({"input": TEXTS, "encoding_format": "base64"}), LambdaContext()
    )
    status, _, body = lambda_answer(answered)
    assert status == 200, body[:300]
    payload = json.loads(body)
    assert_openai_response(payload)
    assert [item["index"] for item in payload["data"]] == list(range(1000))
    assert decode_base64(payload["data"][999]["embedding"]).shape == (768,)
    assert len(json.dumps(answered).encode()) <= LAMBDA_RESPONSE_LIMIT_BYTES
    assert sum(rows) == 1000


def test_serve_has_no_response_limit_unless_set(wide_dir: Path) -> None:
    # GIVEN the app as `siglip-text serve` builds it (no frontend buffers its answer)
    settings = load_settings(model_dir=wide_dir, ort_intra_op_threads=1)
    app = create_app(load_service(settings), settings)
    body = json.dumps({"input": TEXTS, "encoding_format": "float"}).encode()
    # THEN 1,000 float vectors of 768-d are answered
    status, _, content = asgi_call(app, body, {"content-type": "application/json"})
    assert status == 200, content[:300]
    assert len(json.loads(content)["data"]) == 1000
    # AND with SIGLIP_MAX_RESPONSE_BYTES set (a proxy in front that buffers) they are refused
    # (a number of inputs set, so that the response check, not the derived bound, refuses)
    limited = load_settings(
        model_dir=wide_dir,
        ort_intra_op_threads=1,
        max_response_bytes=6_000_000,
        max_inputs_per_request=2048,
    )
    status, _, content = asgi_call(
        create_app(load_service(limited), limited), body, {"content-type": "application/json"}
    )
    assert status == 413 and json.loads(content)["error"]["code"] == "response_too_large"


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_a_set_response_limit_holds_at_its_edge_through_the_handler(
    demo_dir: Path, encoding: str
) -> None:
    # GIVEN the demo model behind a small frontend limit (SIGLIP_MAX_RESPONSE_BYTES)
    limit = 120_000
    # (a number of inputs set: the derived bound would refuse first, as float JSON)
    with built_lambda(
        demo_dir, SIGLIP_MAX_RESPONSE_BYTES=str(limit), SIGLIP_MAX_INPUTS_PER_REQUEST="2048"
    ) as module:
        service = module.parts.service
        fit = inputs_that_fit(
            limit,
            dimension=service.dimension,
            encoding=encoding,
            model=service.model_id,
            max_tokens=service.max_tokens,
        )
        texts = [f"a long caption of a red block, number {i}" * 3 for i in range(fit + 1)]
        # WHEN the most inputs that fit are sent, and one more
        answered = module.handler(
            embeddings_event({"input": texts[:fit], "encoding_format": encoding}), LambdaContext()
        )
        refused = module.handler(
            embeddings_event({"input": texts, "encoding_format": encoding}), LambdaContext()
        )
    # THEN the first is answered within the limit, the second is a 413 that names the most
    status, _, body = lambda_answer(answered)
    assert status == 200, body[:300]
    assert len(json.dumps(answered).encode()) <= limit
    status, _, body = lambda_answer(refused)
    error = json.loads(body)["error"]
    assert status == 413 and error["code"] == "response_too_large"
    assert (f"{fit} as 'base64'" if encoding == "base64" else f"at most {fit} inputs") in (
        error["message"]
    )


def test_too_little_time_left_is_refused_before_the_model_runs(
    demo_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an invocation with 300 ms left, less than the reserve the answer needs (500 ms)
    with built_lambda(demo_dir) as module:
        rows = counting_model_runs(module, monkeypatch)
        context = ScriptedContext(remaining=[300])
        # WHEN a request arrives
        result = module.handler(embeddings_event({"input": TEXTS[:64]}), context)
    # THEN it is an OpenAI-shaped 413, not a Lambda timeout, and the model never ran
    status, headers, body = lambda_answer(result)
    error = json.loads(body)
    assert status == 413, body[:300]
    assert_openai_error(error)
    assert error["error"]["code"] == "insufficient_time"
    assert "before the model ran" in error["error"]["message"]
    assert "retry-after" not in headers
    assert rows == []


def test_a_request_whose_rest_cannot_finish_stops_between_chunks(
    demo_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a batch of 4 chunks, and an invocation whose clock runs out after the first
    with built_lambda(demo_dir, SIGLIP_MAX_TEXT_BATCH_SIZE="16") as module:
        rows = counting_model_runs(module, monkeypatch)
        # (read before tokenization, before the first chunk, then before the second)
        context = ScriptedContext(remaining=[30_000, 30_000, 400])
        result = module.handler(embeddings_event({"input": TEXTS[:64]}), context)
        ran = list(rows)
        # AND the same request with time to spare
        served = module.handler(embeddings_event({"input": TEXTS[:64]}), LambdaContext())
    # THEN it stopped after the chunks that could run, with a 413 saying so
    status, _, body = lambda_answer(result)
    error = json.loads(body)["error"]
    assert status == 413, body[:300]
    assert error["code"] == "insufficient_time"
    assert "after 16 of 64 inputs" in error["message"]
    assert ran == [16]
    # AND with time to spare it is answered
    assert lambda_answer(served)[0] == 200


@pytest.mark.parametrize("refusal", ["response_too_large", "insufficient_time"])
def test_the_openai_client_does_not_retry_either_refusal(demo_dir: Path, refusal: str) -> None:
    # GIVEN the openai client with its default retries, in front of the real app
    limit = 2048 if refusal == "response_too_large" else None
    settings = load_settings(
        model_dir=demo_dir,
        ort_intra_op_threads=1,
        max_response_bytes=limit,
        max_inputs_per_request=2048,
    )
    service = load_service(settings)
    app = create_app(service, settings)
    arrived: list[str] = []

    async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            arrived.append(scope["path"])
            if refusal == "insufficient_time":  # as Mangum passes Lambda's context: 0.1 s left
                scope["aws.context"] = ScriptedContext(remaining=[100])
        await app(scope, receive, send)

    async def call() -> None:
        transport = httpx.ASGITransport(app=counted)
        async with httpx.AsyncClient(transport=transport) as http:
            client = AsyncOpenAI(base_url="http://test/v1", api_key="k", http_client=http)
            assert client.max_retries == 2
            await client.embeddings.create(input=TEXTS[:40], model=service.model_id)

    # WHEN a request gets the refusal
    with pytest.raises(APIStatusError) as caught:
        asyncio.run(call())
    # THEN it is a 413 with that code, sent once: OpenAI's clients retry 408, 409, 429, 5xx
    assert caught.value.status_code == 413
    assert caught.value.code == refusal
    assert arrived == ["/v1/embeddings"]
