"""`http.connections.framing_refusal`: the decision from a request's head alone, whichever of
uvicorn's parsers read it."""

from __future__ import annotations

from typing import Any

import pytest
from siglip_text.http.connections import MAX_HEADER_BYTES, framing_refusal, head_size
from siglip_text.http.errors import HeadersTooLargeError, InvalidFramingError, error_answer


def scope(
    *headers: tuple[bytes, bytes], version: str = "1.1", path: bytes = b"/x"
) -> dict[str, Any]:
    return {
        "type": "http",
        "http_version": version,
        "method": "POST",
        "raw_path": path,
        "query_string": b"",
        "headers": list(headers),
    }


HOST = (b"host", b"127.0.0.1")


def test_a_well_framed_head_is_let_through() -> None:
    assert framing_refusal(scope(HOST, (b"content-length", b"14"))) is None
    assert framing_refusal(scope(HOST, (b"transfer-encoding", b"Chunked"))) is None
    assert framing_refusal(scope(version="1.0")) is None  # HTTP/1.0 needs no Host


def test_a_head_past_the_bound_is_a_431() -> None:
    big = scope(HOST, (b"x-big", b"a" * MAX_HEADER_BYTES))
    assert head_size(big) > MAX_HEADER_BYTES
    refusal = framing_refusal(big)
    assert isinstance(refusal, HeadersTooLargeError)


def test_the_head_size_counts_the_line_and_every_header_as_sent() -> None:
    raw = b"POST /x HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 14\r\n\r\n"
    assert head_size(scope(HOST, (b"content-length", b"14"))) == len(raw)


@pytest.mark.parametrize(
    ("head", "param"),
    [
        (
            scope((b"content-length", b"5"), (b"transfer-encoding", b"chunked"), HOST),
            "Transfer-Encoding",
        ),
        (scope(HOST, (b"transfer-encoding", b"gzip, chunked")), "Transfer-Encoding"),
        (
            scope(HOST, (b"transfer-encoding", b"chunked"), (b"transfer-encoding", b"chunked")),
            "Transfer-Encoding",
        ),
        (scope((b"transfer-encoding", b"chunked"), version="1.0"), "Transfer-Encoding"),
        (scope(HOST, (b"content-length", b"5"), (b"content-length", b"5")), "Content-Length"),
        (scope(HOST, (b"content-length", b"5, 5")), "Content-Length"),
        (scope(), "Host"),
        (scope(HOST, HOST), "Host"),
    ],
    ids=[
        "CL and TE",
        "TE not chunked alone",
        "TE twice",
        "TE in HTTP/1.0",
        "CL twice",
        "CL as a list",
        "no Host",
        "two Host",
    ],
)
def test_an_ambiguous_or_faulty_framing_is_a_400_naming_the_header(
    head: dict[str, Any], param: str
) -> None:
    refusal = framing_refusal(head)
    assert refusal is not None
    assert isinstance(refusal, InvalidFramingError)
    assert (error_answer(refusal).status, refusal.param) == (400, param)
    assert error_answer(refusal).headers["Connection"] == "close"
