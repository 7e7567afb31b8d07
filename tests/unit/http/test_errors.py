"""http_errors: the one table from error kind to HTTP status and OpenAI type, the headers and
body of an error answer, and the declared-length check of the body limit."""

from __future__ import annotations

import json

import pytest
from siglip_text.engine.errors import (
    ConfigError,
    InferenceError,
    InvalidInputError,
    ModelLoadError,
    ModelNotFoundError,
    SiglipError,
    TokenIdInputsRejectedError,
    TooManyInputsError,
)
from siglip_text.http.errors import (
    ERRORS,
    INTERNAL_ERROR_MESSAGE,
    AuthenticationError,
    HeadersTooLargeError,
    InvalidHeaderError,
    KeysUnavailableError,
    OverloadedError,
    PayloadTooLargeError,
    ShuttingDownError,
    UnsupportedContentEncodingError,
    body_too_large,
    error_answer,
    status_for,
)
from siglip_text.http.gate import declares_more_than, method_not_allowed

from devkit.openai_shapes import assert_openai_error


@pytest.mark.parametrize(
    ("error", "status", "error_type"),
    [
        (InvalidInputError("x"), 400, "invalid_request_error"),
        (TokenIdInputsRejectedError("x"), 400, "invalid_request_error"),
        (AuthenticationError("x"), 401, "invalid_request_error"),
        (ModelNotFoundError("x"), 404, "invalid_request_error"),
        (PayloadTooLargeError("x"), 413, "invalid_request_error"),
        (TooManyInputsError("x"), 413, "invalid_request_error"),
        (OverloadedError("x"), 429, "rate_limit_error"),
        (ShuttingDownError("x"), 503, "server_error"),
        (KeysUnavailableError(), 503, "server_error"),
        (InvalidHeaderError("x"), 400, "invalid_request_error"),
        (UnsupportedContentEncodingError("x"), 415, "invalid_request_error"),
        (HeadersTooLargeError("x"), 431, "invalid_request_error"),
        (InferenceError("x"), 500, "server_error"),
        (ModelLoadError("x"), 500, "server_error"),
        (ConfigError("x"), 500, "server_error"),
        (SiglipError("x"), 500, "server_error"),
    ],
)
def test_each_error_kind_maps_to_its_status_and_openai_type(
    error: SiglipError, status: int, error_type: str
) -> None:
    assert status_for(error) == (status, error_type)
    answer = error_answer(error)
    body = json.loads(answer.body)
    assert_openai_error(body)
    assert answer.status == status and body["error"]["type"] == error_type
    assert body["error"]["code"] == error.code


@pytest.mark.parametrize(
    ("error", "headers"),
    [
        (OverloadedError("busy"), {"Retry-After": "1"}),
        (ShuttingDownError("stopping"), {"Retry-After": "1"}),
        (AuthenticationError("no key"), {"WWW-Authenticate": "Bearer"}),
        (KeysUnavailableError(retry_after=7), {"Retry-After": "7"}),
        (method_not_allowed("PUT", "/health", ["GET", "HEAD"]), {"Allow": "GET, HEAD"}),
        (UnsupportedContentEncodingError("gzip"), {"Accept-Encoding": "identity"}),
        (InvalidInputError("bad"), {}),
        (InferenceError("nan"), {}),
    ],
)
def test_refusals_to_retry_say_when_and_401_names_the_scheme(
    error: SiglipError, headers: dict[str, str]
) -> None:
    assert error_answer(error).headers == headers


def test_the_engine_defines_no_protocol_kind_and_the_table_covers_every_http_kind() -> None:
    from siglip_text.engine import errors as engine_errors
    from siglip_text.http import errors as http_errors

    engine_kinds = {
        value
        for value in vars(engine_errors).values()
        if isinstance(value, type) and issubclass(value, SiglipError)
    }
    protocol_statuses = {401, 405, 408, 415, 429, 431, 503}
    assert not [k for k in engine_kinds if k in ERRORS and ERRORS[k].status in protocol_statuses]
    http_kinds = [
        value
        for value in vars(http_errors).values()
        if isinstance(value, type) and issubclass(value, SiglipError) and value not in engine_kinds
    ]
    unlisted = [k for k in http_kinds if not any(b in ERRORS for b in k.__mro__[:-2])]
    assert http_kinds and not unlisted


def test_a_500_says_only_the_generic_message_and_a_503_says_why() -> None:
    hidden = json.loads(error_answer(InferenceError("NaN in row 3 of onnx output")).body)
    assert hidden["error"]["message"] == INTERNAL_ERROR_MESSAGE
    shown = json.loads(error_answer(ShuttingDownError("grace period ended; retry")).body)
    assert shown["error"]["message"] == "grace period ended; retry"


def test_error_body_is_compact_utf8_json_with_the_param() -> None:
    answer = error_answer(InvalidInputError("'input' ist ungültig", param="input"))
    assert b", " not in answer.body and "ungültig".encode() in answer.body
    assert json.loads(answer.body)["error"]["param"] == "input"


@pytest.mark.parametrize(
    ("content_length", "over"),
    [
        ("11", True),
        (b"11", True),
        ("10", False),
        ("0000000011", True),
        ("0" * 5000 + "10", False),
        ("9" * 5000, True),
        ("²", False),
        ("-11", False),
        (" 11", False),
        ("", False),
        (None, False),
    ],
)
def test_declared_length_counts_only_plain_digits_over_the_limit(
    content_length: str | bytes | None, over: bool
) -> None:
    assert declares_more_than(content_length, 10) is over


def test_body_too_large_is_a_413_that_names_the_limit() -> None:
    error = body_too_large(1024)
    assert status_for(error)[0] == 413
    assert "1024 bytes" in error.message
