"""An exception no one expected (unexpected.py): the log says its type, place and scrubbed
message and never the query text nor the traceback; the client gets OpenAI's generic 500,
nothing of the exception."""

from __future__ import annotations

import io
import json
import logging

import pytest
from aws_lambda_powertools import Logger
from siglip_text.engine.errors import SiglipError
from siglip_text.http.errors import INTERNAL_ERROR_MESSAGE, error_answer
from siglip_text.http.unexpected import unexpected, unexpected_error

from devkit.openai_shapes import assert_openai_error

QUERY = "my private query about a red bicycle"


def _innermost() -> None:
    raise ValueError(f"cannot embed '{QUERY}' at idx=48213\nsecond line: {QUERY}")


def raised() -> ValueError:
    """A ValueError raised two frames down, its message quoting the query."""
    try:
        _innermost()
    except ValueError as exc:
        return exc
    raise AssertionError("not raised")


def test_the_cause_names_the_type_the_innermost_place_and_the_scrubbed_first_line() -> None:
    exc = raised()
    line = _innermost.__code__.co_firstlineno + 1
    assert unexpected(exc) == (
        f"ValueError at test_unexpected.py:{line}: cannot embed <quoted> at idx=<n>"
    )


def test_an_exception_never_raised_has_no_place() -> None:
    assert unexpected(KeyError("x")) == "KeyError at ?: <quoted>"
    assert unexpected(RuntimeError("")) == "RuntimeError at ?: "


def test_the_log_record_says_the_cause_and_holds_no_query_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger("siglip_text.test_unexpected")
    with caplog.at_level(logging.ERROR, logger=log.name):
        unexpected_error(raised(), log)
    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert record.getMessage() == f"answered 500: unexpected error: {unexpected(raised())}"
    assert record.cause == unexpected(raised())  # type: ignore[attr-defined]  # extra=
    assert record.exc_info is None and record.exc_text is None  # no traceback logged
    assert QUERY not in caplog.text and "48213" not in caplog.text


def test_powertools_logger_logs_it_without_query_text_too() -> None:
    stream = io.StringIO()
    log = Logger(service="siglip-text-test", logger_handler=logging.StreamHandler(stream))
    unexpected_error(raised(), log)
    (line,) = stream.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["level"] == "ERROR" and entry["cause"].startswith("ValueError at ")
    assert QUERY not in line and "Traceback" not in line


def test_the_answer_is_openais_generic_500_saying_nothing_of_the_exception() -> None:
    error = unexpected_error(raised(), logging.getLogger("siglip_text.test_unexpected"))
    assert isinstance(error, SiglipError)
    answer = error_answer(error)
    assert answer.status == 500
    body = json.loads(answer.body)
    assert_openai_error(body)
    assert body["error"]["message"] == INTERNAL_ERROR_MESSAGE
    text = answer.body.decode()
    for internal in ("ValueError", "test_unexpected.py", "cannot embed", QUERY, "48213"):
        assert internal not in text
