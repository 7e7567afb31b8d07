"""`serve`'s HTTP framing under either of uvicorn's parsers (h11, httptools): the header bound,
requests the parser refuses and framings RFC 9112 calls ambiguous, over raw sockets.

Each answer is OpenAI's JSON error shape, never uvicorn's plain text, and each refused request
is the connection's last: nothing after it is read as a request (the request-smuggling shape
behind a proxy that frames the bytes differently).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from siglip_text.assembly import Platform, build_app
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.connections import MAX_HEADER_BYTES
from siglip_text.settings import Settings

from devkit.guarded_server import PARSERS, Exchange, exchange, guarded_server
from devkit.openai_shapes import assert_openai_error

HOST = b"Host: 127.0.0.1\r\n"
BODY = b'{"input":["a red block"]}'
HEALTH = b"GET /health HTTP/1.1\r\n" + HOST + b"Connection: close\r\n"
SECOND = b"GET /health HTTP/1.1\r\n" + HOST + b"\r\n"


def post(headers: bytes, body: bytes = BODY, version: bytes = b"1.1") -> bytes:
    return (
        b"POST /v1/embeddings HTTP/" + version + b"\r\n" + HOST + b"Content-Type: "
        b"application/json\r\n" + headers + b"\r\n" + body
    )


def chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


@pytest.fixture(scope="module", params=PARSERS)
def port(
    request: pytest.FixtureRequest, service: EmbeddingService, settings: Settings
) -> Iterator[int]:
    with guarded_server(
        build_app(service, settings, Platform.SERVE, host="127.0.0.1"), request.param
    ) as port:
        yield port


def assert_refused(got: Exchange, status: int, param: str | None = None) -> None:
    """One answer, ``status`` in OpenAI's shape, and the connection closed after it."""
    assert [a.status for a in got.answers] == [status], got.raw[:300]
    answer = got.answers[0]
    assert answer.headers["content-type"] == "application/json"
    assert_openai_error(json.loads(answer.body))
    if param is not None:
        assert json.loads(answer.body)["error"]["param"] == param
    assert got.closed, "the connection stayed open after a refused request"


HEADS_PAST_THE_BOUND = {
    "one 70 KiB header": (HEALTH + b"X-Big: " + b"a" * 70 * 1024 + b"\r\n\r\n",),
    "one 100,000-byte header": (HEALTH + b"X-Big: " + b"a" * 100_000 + b"\r\n\r\n",),
    "10,000 headers": (HEALTH + b"".join(b"X-H%d: v\r\n" % i for i in range(10_000)) + b"\r\n",),
    "two parts of 60 KB": (HEALTH + b"X-Big: " + b"a" * 60_000, b"a" * 60_000 + b"\r\n\r\n"),
    "a 70 KiB header then a body": (
        post(b"Content-Length: %d\r\nX-Big: %s\r\n" % (len(BODY), b"a" * 70 * 1024)),
    ),
}


@pytest.mark.parametrize("parts", HEADS_PAST_THE_BOUND.values(), ids=HEADS_PAST_THE_BOUND)
def test_headers_past_64_kib_get_a_431_and_the_connection_closed(
    port: int, parts: tuple[bytes, ...]
) -> None:
    # GIVEN a request whose line and headers pass 64 KiB, sent at once or in two parts
    got = exchange(port, *parts, pause=0.2)
    # THEN it gets one 431 in OpenAI's shape, and the connection is closed
    assert_refused(got, 431)
    assert sum(len(part) for part in parts) > MAX_HEADER_BYTES


def test_a_60_kb_header_in_two_parts_is_within_the_bound_and_served(port: int) -> None:
    # GIVEN a 60 KB header (under 64 KiB) that arrives in two parts
    got = exchange(
        port, HEALTH + b"X-Big: " + b"a" * 30_000, b"a" * 30_000 + b"\r\n\r\n", pause=0.2
    )
    # THEN it is served like any request (h11 alone would refuse any unfinished head past
    # 16 KiB with a plain-text 400)
    assert [a.status for a in got.answers] == [200], got.raw[:300]


REFUSED_BY_A_PARSER = {
    "two differing Content-Length": post(
        b"Content-Length: %d\r\nContent-Length: 3\r\n" % len(BODY)
    ),
    "Content-Length: +N": post(b"Content-Length: +%d\r\n" % len(BODY)),
    "a bad chunk size": post(
        b"Transfer-Encoding: chunked\r\n", b"zz\r\n" + BODY + b"\r\n0\r\n\r\n"
    ),
    "a request line that is not HTTP": b"HELLO\r\n\r\n",
}


@pytest.mark.parametrize("raw", REFUSED_BY_A_PARSER.values(), ids=REFUSED_BY_A_PARSER)
def test_a_request_the_parser_refuses_gets_a_400_in_openai_shape(port: int, raw: bytes) -> None:
    # GIVEN bytes uvicorn's parser refuses, followed by a second request on the connection
    got = exchange(port, raw + SECOND)
    # THEN the one answer is a JSON 400 (never uvicorn's plain "Invalid HTTP request
    # received."), and the connection is closed: the second request is never answered
    assert_refused(got, 400)


AMBIGUOUS = {
    "Content-Length with Transfer-Encoding": (
        post(
            b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n"
            % (len(chunked(BODY)) + len(SECOND)),
            chunked(BODY),
        ),
        "Transfer-Encoding",
    ),
    "Transfer-Encoding: gzip, chunked": (
        post(b"Transfer-Encoding: gzip, chunked\r\n", chunked(BODY)),
        "Transfer-Encoding",
    ),
    "Transfer-Encoding in HTTP/1.0": (
        post(b"Transfer-Encoding: chunked\r\n", chunked(BODY), version=b"1.0"),
        "Transfer-Encoding",
    ),
    "HTTP/1.1 without Host": (b"GET /health HTTP/1.1\r\n\r\n", "Host"),
    "two Host headers": (b"GET /health HTTP/1.1\r\n" + HOST + HOST + b"\r\n", "Host"),
}


@pytest.mark.parametrize(("raw", "param"), AMBIGUOUS.values(), ids=AMBIGUOUS)
def test_an_ambiguous_framing_gets_one_answer_and_the_connection_closed(
    port: int, raw: bytes, param: str
) -> None:
    # GIVEN a request whose framing RFC 9112 calls ambiguous or faulty, with a second request
    # after it that a server framing by Content-Length would read as the next one
    got = exchange(port, raw + SECOND)
    # THEN it gets one OpenAI-shaped 400 and the connection is closed: the second request is
    # never answered (RFC 9112 section 6.1: the server MUST close the connection)
    assert_refused(got, 400)
    body = json.loads(got.answers[0].body)
    # (a parser may refuse the bytes itself, naming no header: h11 refuses some of these)
    assert body["error"]["param"] in (param, None)


def test_a_well_framed_request_is_still_served_and_the_connection_kept(port: int) -> None:
    # GIVEN two well-framed requests, chunked then with a Content-Length, on one connection
    first = post(b"Transfer-Encoding: chunked\r\n", chunked(BODY))
    last = post(b"Content-Length: %d\r\nConnection: close\r\n" % len(BODY))
    got = exchange(port, first + last)
    # THEN both are answered 200
    assert [a.status for a in got.answers] == [200, 200], got.raw[:300]
