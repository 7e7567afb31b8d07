"""Fuzzing: hostile requests get valid embeddings or an OpenAI-shaped 4xx; never a 5xx or a hang.

Hypothesis generates each kind of hostile request in `devkit/hostile.py` with a fixed seed
(``derandomize=True``) and a fixed number of examples; schemathesis generates requests from
the app's own OpenAPI schema, positive and negative. Every request goes through the real app
and the real demo model: in-process (ASGI), and through the Lambda handler inside REST v1 and
HTTP API v2 events, base64-encoded bodies included. ``-rP`` shows the tallies (lines
starting TRIED).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import schemathesis
from hypothesis import given
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.settings import Settings

from devkit.asgi import asgi_call
from devkit.aws_lambda import (
    LambdaContext,
    built_lambda,
    gateway_event,
    lambda_answer,
    load_event,
)
from devkit.guards import hang_guard, rss_bytes
from devkit.hostile import KINDS, VOCAB_SIZE, Hostile, Tally, check_answer, fuzz_settings

pytestmark = pytest.mark.slow  # fuzzing


URL = "/v1/embeddings"
IN_PROCESS_EXAMPLES_PER_KIND = 40
LAMBDA_EXAMPLES_PER_KIND = 20
SCHEMA_EXAMPLES = 120  # per generation mode
ROUTE_EXAMPLES = 60
#: Per request; generous: a hang fails the suite, slowness is not asserted.
HANG_SECONDS = 60
#: Resident memory the process may gain over a whole run (a leak would grow with it).
MAX_RSS_GROWTH_BYTES = 64 * 2**20
EVENT_TEMPLATES = ("rest-embeddings-text.json", "http-embeddings-text.json")


@pytest.fixture(scope="module")
def lambda_module(demo_dir: Path) -> Iterator[ModuleType]:
    with built_lambda(demo_dir) as module:
        yield module


def test_demo_vocabulary_is_the_one_the_strategies_assume(service: EmbeddingService) -> None:
    assert service.tokenizer.vocab_size == VOCAB_SIZE


def test_hostile_requests_in_process(service: EmbeddingService, settings: Settings) -> None:
    # GIVEN the app with its default bounds (6 MiB bodies, 2048 inputs) on the demo model,
    # warmed up with a maximal request so that the allocator has grown to its working size
    app = create_app(service, settings)
    loop = asyncio.new_event_loop()
    tally = Tally()
    json_headers = {"content-type": "application/json"}
    asgi_call(app, json.dumps({"input": ["warm up"] * 2048}).encode(), json_headers, loop=loop)
    asgi_call(app, b'{"input": "%s"}' % (b"a" * 6_000_000), json_headers, loop=loop)

    def campaign() -> None:
        for strategy in KINDS.values():

            @fuzz_settings(IN_PROCESS_EXAMPLES_PER_KIND)
            @given(request=strategy())
            def fuzz(request: Hostile) -> None:
                with hang_guard(HANG_SECONDS):
                    answer = asgi_call(app, request.body, request.header_dict(), loop=loop)
                # THEN each answer is valid embeddings or an OpenAI-shaped 4xx
                check_answer(request, *answer, service=service, tally=tally)

            fuzz()

    # WHEN every kind of hostile request is sent, the same number of times each, twice: the
    # first campaign also grows the allocator's arenas of the worker threads that parse
    # bodies (one each, however the pool hands requests out); a leak grows with the second
    campaign()
    rss_before = rss_bytes()
    campaign()
    loop.close()
    growth = rss_bytes() - rss_before
    print(tally.summary("in-process"), f"RSS growth {growth / 2**20:.1f} MiB")
    # AND every kind was tried, both outcomes occurred, and memory did not grow with the run
    assert set(tally.kinds) == set(KINDS)
    assert min(tally.kinds.values()) >= 8, tally.kinds
    assert tally.statuses[200] >= 100 and tally.statuses[400] >= 100, tally.statuses
    assert {404, 413} <= set(tally.statuses), tally.statuses
    assert growth < MAX_RSS_GROWTH_BYTES


def test_hostile_requests_through_the_lambda_handler(
    lambda_module: ModuleType, service: EmbeddingService
) -> None:
    templates = {name: load_event(name) for name in EVENT_TEMPLATES}
    tally = Tally()
    events: Counter[str] = Counter()
    warm_up = Hostile("warm-up", json.dumps({"input": ["warm up"] * 2048}).encode())
    for template in templates.values():
        lambda_module.handler(gateway_event(template, warm_up, base64_body=True), LambdaContext())
    rss_before = rss_bytes()

    for strategy in KINDS.values():
        # GIVEN hostile requests in REST v1 and HTTP API v2 events, base64-encoded or not
        @fuzz_settings(LAMBDA_EXAMPLES_PER_KIND)
        @given(
            request=strategy(),
            template=st.sampled_from(EVENT_TEMPLATES),
            base64_body=st.booleans(),
        )
        def fuzz(request: Hostile, template: str, base64_body: bool) -> None:
            event = gateway_event(templates[template], request, base64_body=base64_body)
            events[template.split("-")[0] + ("-base64" if event["isBase64Encoded"] else "")] += 1
            # WHEN the real handler (Powertools, Mangum, FastAPI, ORT) takes each one
            with hang_guard(HANG_SECONDS):
                result = lambda_module.handler(event, LambdaContext())
            # THEN the proxy response holds valid embeddings or an OpenAI-shaped 4xx
            check_answer(request, *lambda_answer(result), service=service, tally=tally)

        fuzz()
    growth = rss_bytes() - rss_before
    print(tally.summary("lambda"), dict(events), f"RSS growth {growth / 2**20:.1f} MiB")
    assert growth < MAX_RSS_GROWTH_BYTES
    assert set(tally.kinds) == set(KINDS)
    assert min(events[k] for k in ("rest", "http", "rest-base64", "http-base64")) >= 20, events
    assert tally.statuses[200] >= 50 and tally.statuses[400] >= 50, tally.statuses


@st.composite
def routes(draw: st.DrawFn) -> tuple[str, str]:
    method = draw(st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]))
    path = draw(
        st.one_of(
            st.sampled_from(["/health", "/v1/models", URL, "/v1/embeddings/", "/", "//v1"]),
            st.text(min_size=1, max_size=30).map(lambda p: "/" + p),
            st.text(min_size=1, max_size=3).map(lambda p: "/v1/" + p * 4000),
            st.sampled_from(["/%ff%fe", "/%00", "/..%2f..%2fetc/passwd", "/\x00", "/caf\u00e9"]),
        )
    )
    return method, path


def test_any_method_and_path_gets_a_short_openai_shaped_answer(
    service: EmbeddingService, settings: Settings, lambda_module: ModuleType
) -> None:
    app = create_app(service, settings)
    template = load_event("http-embeddings-text.json")
    tally = Tally()

    @fuzz_settings(ROUTE_EXAMPLES)
    @given(route=routes())
    def fuzz(route: tuple[str, str]) -> None:
        method, path = route
        request = Hostile("routes", b'{"input": "x"}')
        with hang_guard(HANG_SECONDS):
            status, headers, content = asgi_call(
                app, request.body, request.header_dict(), method=method, path=path
            )
            event = gateway_event(template, request, base64_body=False, path=path)
            event["requestContext"]["http"]["method"] = method
            via_lambda = lambda_answer(lambda_module.handler(event, LambdaContext()))
        for answer in ((status, headers, content), via_lambda):
            if method == "HEAD" and not answer[2]:
                continue  # an answer to HEAD may have no body
            if answer[0] == 200 and (method, path) != ("POST", URL):
                assert (method, path) in {("GET", "/health"), ("GET", "/v1/models")}, route
                assert json.loads(answer[2])
                tally.statuses[200] += 1
                continue
            check_answer(request, *answer, service=service, tally=tally)

    fuzz()
    print(tally.summary("routes"))
    assert {200, 404, 405} <= set(tally.statuses), tally.statuses


@pytest.fixture(scope="module")
def api_schema(service: EmbeddingService, settings: Settings) -> Any:
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(service, settings))


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
def test_schemathesis_requests_from_the_apps_own_openapi_schema(
    api_schema: Any, lambda_module: ModuleType, service: EmbeddingService, mode: GenerationMode
) -> None:
    operation = api_schema["/v1/embeddings"]["POST"]
    template = load_event("rest-embeddings-text.json")
    tally = Tally()

    @fuzz_settings(SCHEMA_EXAMPLES)
    @given(case=operation.as_strategy(generation_mode=mode))
    def fuzz(case: Any) -> None:
        # The body exactly as schemathesis serializes it, through the app and the handler
        kwargs = case.as_transport_kwargs()
        request = Hostile(
            f"schema-{mode.value}",
            _as_bytes(kwargs),
            content_type=case.media_type,
            headers=tuple((k, v) for k, v in (kwargs.get("headers") or {}).items()),
        )
        with hang_guard(HANG_SECONDS):
            response = case.call()
            event = gateway_event(template, request, base64_body=False)
            via_lambda = lambda_answer(lambda_module.handler(event, LambdaContext()))
        case.validate_response(
            response,
            checks=[
                not_a_server_error,
                status_code_conformance,
                content_type_conformance,
                response_schema_conformance,
            ],
        )
        check_answer(
            request,
            response.status_code,
            _first_values(response.headers),
            response.content,
            service=service,
            tally=tally,
        )
        check_answer(request, *via_lambda, service=service, tally=tally)

    fuzz()
    print(tally.summary(f"schemathesis {mode.value}"))
    assert tally.requests >= SCHEMA_EXAMPLES  # each case went both ways
    if mode is GenerationMode.POSITIVE:
        assert tally.statuses[200] >= 20, tally.statuses
    else:
        assert set(tally.statuses) <= {400, 404, 413}, tally.statuses


def _as_bytes(kwargs: dict[str, Any]) -> bytes:
    if "json" in kwargs:
        return json.dumps(kwargs["json"]).encode("utf-8", "surrogatepass")
    content = kwargs.get("content", kwargs.get("data", b""))
    if isinstance(content, str):
        return content.encode("utf-8", "surrogatepass")
    return bytes(content or b"")


def _first_values(headers: dict[str, Any]) -> dict[str, str]:
    """Schemathesis keeps header values as lists."""
    return {k.lower(): v[-1] if isinstance(v, list) else v for k, v in headers.items()}
