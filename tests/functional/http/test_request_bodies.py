"""What one request may cost: the body limit at its exact edge, and hostile shapes found by fuzzing.

Bodies are sent at exactly ``SIGLIP_MAX_REQUEST_BYTES`` (6 MiB by default) and one byte more,
in-process and through the Lambda handler (REST v1 and HTTP API v2, plain and base64). Behind
API Gateway, Lambda's own 6 MB invocation payload limit (the whole event, a base64 body a third
larger) refuses such bodies before the function runs; the app's limit is what holds in server
mode and whatever sits in front.
"""

from __future__ import annotations

import contextlib
import json
import tracemalloc
from types import ModuleType

import pytest
from siglip_text.engine.errors import InvalidInputError, SiglipError
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.http.embeddings import parse_request
from siglip_text.settings import Settings

from devkit.asgi import asgi_call
from devkit.aws_lambda import (
    LambdaContext,
    gateway_event,
    lambda_answer,
    load_event,
)
from devkit.hostile import Hostile, Tally, check_answer

URL = "/v1/embeddings"
JSON = {"content-type": "application/json"}


def body_of_size(size: int, *, padding: str = "text") -> bytes:
    """A valid request of exactly `size` bytes: one long text, or one word and whitespace."""
    if padding == "text":
        head, tail = b'{"input": "', b'"}'
        text = (b"a cat " * (size // 6 + 1))[: size - len(head) - len(tail)]
        return head + text + tail
    core = b'{"input": "a red block"}'
    return core + b" " * (size - len(core))


@pytest.mark.parametrize("padding", ["text", "whitespace"])
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "streamed"])
def test_body_at_the_limit_is_served_and_one_byte_more_is_413_in_process(
    service: EmbeddingService, settings: Settings, padding: str, declared: bool
) -> None:
    app = create_app(service, settings)
    limit = settings.max_request_bytes
    tally = Tally()
    for size, status in ((limit, 200), (limit + 1, 413)):
        body = body_of_size(size, padding=padding)
        assert len(body) == size
        headers = {**JSON, "content-length": str(size)} if declared else JSON
        answer = asgi_call(app, body, headers)
        assert answer[0] == status, answer[2][:300]
        check_answer(Hostile("limit", body), *answer, service=service, tally=tally)


@pytest.mark.parametrize("template", ["rest-embeddings-text.json", "http-embeddings-text.json"])
@pytest.mark.parametrize("base64_body", [False, True], ids=["text", "base64"])
def test_body_at_the_limit_is_served_and_one_byte_more_is_413_through_the_handler(
    lambda_module: ModuleType, service: EmbeddingService, template: str, base64_body: bool
) -> None:
    limit = lambda_module.parts.settings.max_request_bytes
    assert limit == 6 * 1024 * 1024
    tally = Tally()
    for size, status in ((limit, 200), (limit + 1, 413)):
        request = Hostile("limit", body_of_size(size))
        event = gateway_event(load_event(template), request, base64_body=base64_body)
        answer = lambda_answer(lambda_module.handler(event, LambdaContext()))
        assert answer[0] == status, answer[2][:300]
        check_answer(request, *answer, service=service, tally=tally)


# --- found by fuzzing: each failed before its fix --------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("item", [b"{}", b"1.5", b"null", b"[1.5]", b'"a",1', b"0,{}"])
def test_array_of_wrong_items_is_refused_without_an_error_per_item(item: bytes) -> None:
    # GIVEN a 1 MB array whose items are of no accepted form (or one bad item at the end)
    body = b'{"input":[' + b",".join([item] * (1_000_000 // (len(item) + 1))) + b"]}"
    tracemalloc.start()
    try:
        # WHEN it is parsed
        with pytest.raises(InvalidInputError) as refused:
            parse_request(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # THEN it is a 400 naming the field, at the memory cost of the parsed JSON (a pydantic
    # union would build one error per item per accepted form: gigabytes for a 6 MB body)
    assert refused.value.param == "input"
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MiB"


@pytest.mark.slow
@pytest.mark.parametrize(
    "body",
    [
        b'{"input":[%s]}' % b",".join([b"[]"] * 330_000),
        b'{"input":[%s]}' % b",".join([b"[0]"] * 250_000),
        b'{"input":[%s]}' % b",".join([b"0"] * 500_000),
        b'{"input":"x","extra":[%s]}' % b",".join([b"{}"] * 330_000),
    ],
    ids=["empty-arrays", "one-id-arrays", "ids", "objects-elsewhere"],
)
def test_parsing_memory_is_linear_in_the_body(body: bytes) -> None:
    # GIVEN 1 MB bodies of the shapes that make the most Python objects per byte
    tracemalloc.start()
    try:
        # WHEN parsed (accepted, or refused at one of the request schema's bounds)
        with contextlib.suppress(SiglipError):
            parse_request(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # THEN the parse holds at most 64 bytes of Python objects per body byte (measured up to
    # 43: 256 MiB for the worst 6 MiB body, 2 million empty arrays)
    assert peak < 64 * len(body), f"{peak / len(body):.0f} bytes per body byte"


@pytest.mark.parametrize(
    "value",
    [b"\xb2", "٣".encode(), b"0" * 5_000 + b"14", b"-1", b"1e3", b" 14"],
    ids=["superscript-2", "arabic-3", "5000-digit-14", "negative", "exponent", "space"],
)
def test_content_length_that_is_not_a_plain_number_is_no_server_error(
    service: EmbeddingService, settings: Settings, value: bytes
) -> None:
    # GIVEN a Content-Length header a server or gateway might pass through as it came
    app = create_app(service, settings)
    header = value.decode("latin-1")
    # WHEN a small valid body comes with it
    status, _, content = asgi_call(app, b'{"input": "x"}', {**JSON, "content-length": header})
    # THEN the body's real size decides: served (not a 500 from parsing the header)
    assert status == 200, content[:300]


def test_declared_length_over_the_limit_is_413_before_reading(
    service: EmbeddingService, settings: Settings
) -> None:
    app = create_app(service, settings)
    for declared in (str(settings.max_request_bytes + 1), "9" * 30, "9" * 5_000):
        status, _, _ = asgi_call(app, b'{"input": "x"}', {**JSON, "content-length": declared})
        assert status == 413


def test_trailing_slash_is_an_openai_404_not_a_redirect(
    service: EmbeddingService, settings: Settings
) -> None:
    app = create_app(service, settings)
    status, headers, content = asgi_call(app, b'{"input": "x"}', JSON, path=URL + "/")
    assert status == 404 and "location" not in headers
    assert json.loads(content)["error"]["code"] == "not_found"
