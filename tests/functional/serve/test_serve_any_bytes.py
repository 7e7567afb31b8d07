"""`serve` under either parser, over raw sockets: nothing answered after a ``Connection:
close`` refusal, the Host guard reading the authority (and an absolute-form target's), and a
chunk size past 64 bits refused at once."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest
from siglip_text.assembly import Platform, build_app
from siglip_text.engine.service import EmbeddingService
from siglip_text.settings import Settings

from devkit.guarded_server import (
    PARSERS,
    Warnings,
    exchange,
    guarded_server,
    parse_answers,
    refuse_every_key,
    server_warnings,
)
from devkit.openai_shapes import assert_openai_error

HOST = b"Host: 127.0.0.1\r\n"
BODY = b'{"input":["a red block"]}'
SECOND = b"GET /health HTTP/1.1\r\n" + HOST + b"\r\n"


def post(headers: bytes, body: bytes = BODY, target: bytes = b"/v1/embeddings") -> bytes:
    return b"POST " + target + b" HTTP/1.1\r\n" + headers + b"\r\n" + body


@pytest.fixture(scope="module", params=PARSERS)
def port(
    request: pytest.FixtureRequest, service: EmbeddingService, settings: Settings
) -> Iterator[int]:
    app = build_app(service, settings, Platform.SERVE, host="127.0.0.1")
    with guarded_server(app, request.param) as port:
        yield port


@pytest.fixture(scope="module", params=PARSERS)
def keyed_port(
    request: pytest.FixtureRequest, service: EmbeddingService, settings: Settings
) -> Iterator[int]:
    app = build_app(
        service, settings, Platform.SERVE, host="127.0.0.1", authenticator=refuse_every_key
    )
    with guarded_server(app, request.param) as port:
        yield port


@pytest.fixture
def warnings() -> Iterator[Warnings]:
    with server_warnings() as handler:
        yield handler


def answer_then_more(
    port: int, head_and_start: bytes, rest: bytes, after: bytes, pause: float
) -> bytes:
    """Send a request's head and the start of its body; once an answer's head is back, the
    rest of the body, then (``pause`` seconds later) ``after``; everything the server sent."""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(head_and_start)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            if not chunk:
                return received
            received += chunk
        if rest:
            sock.sendall(rest)
        time.sleep(pause)  # while the refusal drains the body, or once it is closing
        try:
            sock.sendall(after)
        except OSError:  # closed already: nothing more can be answered
            return received
        sock.settimeout(2)
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return received


#: Seconds between the body's last bytes and the next request: at once (it arrives while the
#: refusal drains), and later (the connection is closing).
PAUSES = [0.0, 0.0, 0.0, 0.0, 0.001, 0.01, 0.2]


@pytest.mark.parametrize("pause", PAUSES)
def test_a_request_after_a_415_that_closes_gets_no_answer_and_no_warning(
    port: int, warnings: Warnings, pause: float
) -> None:
    # GIVEN a body that is not JSON (415, Connection: close, the body drained), and another
    # request sent on the connection once the body is all sent
    head = post(b"Content-Type: text/plain\r\nContent-Length: %d\r\n" % len(BODY) + HOST, b"")
    received = answer_then_more(port, head + BODY[:5], BODY[5:], SECOND, pause)
    # THEN the 415 is the one answer, and no WARNING is logged for the bytes after it
    answers = parse_answers(received)
    assert [a.status for a in answers] == [415], received[:400]
    assert answers[0].headers["connection"] == "close"
    assert not warnings.lines, warnings.lines


@pytest.mark.parametrize("split", [5, len(BODY)])
@pytest.mark.parametrize("pause", PAUSES)
def test_a_request_after_a_401_that_closes_gets_no_answer_and_no_warning(
    keyed_port: int, warnings: Warnings, pause: float, split: int
) -> None:
    # GIVEN a request with a key the server refuses (401, Connection: close, body drained)
    head = post(
        b"Content-Type: application/json\r\nAuthorization: Bearer sk-wrong\r\n"
        b"Content-Length: %d\r\n" % len(BODY) + HOST,
        b"",
    )
    received = answer_then_more(keyed_port, head + BODY[:split], BODY[split:], SECOND, pause)
    # THEN the 401 is the one answer, and nothing is logged at WARNING for what followed
    assert [a.status for a in parse_answers(received)] == [401], received[:400]
    assert not warnings.lines, warnings.lines


HOSTS_REFUSED = {
    "a name after an IPv6 literal": b"[::1]evil.example",
    "a name after an IPv6 literal and a port": b"[::1]evil.example:80",
    "user info": b"127.0.0.1@evil.example",
    "a port that is not digits": b"127.0.0.1:80x",
    "two ports": b"127.0.0.1:80:80",
    "another name": b"evil.example",
    "a zone in the literal": b"[fe80::1%25eth0]",
}


@pytest.mark.parametrize("host", HOSTS_REFUSED.values(), ids=HOSTS_REFUSED)
def test_a_host_that_is_no_loopback_authority_is_refused(port: int, host: bytes) -> None:
    raw = post(b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(BODY), BODY)
    got = exchange(port, raw.replace(b"\r\n", b"\r\nHost: " + host + b"\r\n", 1))
    assert [a.status for a in got.answers] == [400], got.raw[:300]
    body = json.loads(got.answers[0].body)
    assert_openai_error(body)
    assert body["error"]["code"] == "invalid_host"


@pytest.mark.parametrize(
    "host", [b"[::1]", b"[0:0::1]:8080", b"LOCALHOST", b"127.0.0.1:80", b"localhost:"]
)
def test_loopback_authorities_are_served(port: int, host: bytes) -> None:
    raw = post(
        b"Host: " + host + b"\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n" % len(BODY)
    )
    got = exchange(port, raw)
    assert [a.status for a in got.answers] == [200], got.raw[:300]


def test_an_absolute_form_target_is_checked_in_place_of_host(port: int) -> None:
    # GIVEN an absolute-form target naming another server, with a loopback Host header
    headers = HOST + b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(BODY)
    got = exchange(port, post(headers, target=b"http://evil.example/v1/embeddings"))
    # THEN the target's authority is the one checked (RFC 9112 section 3.2.2): a 400
    assert [a.status for a in got.answers] == [400], got.raw[:300]
    assert json.loads(got.answers[0].body)["error"]["code"] == "invalid_host"


def test_an_absolute_form_target_naming_loopback_is_served_at_its_path(port: int) -> None:
    headers = (
        b"Host: evil.example\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n" % len(BODY)
    )
    got = exchange(port, post(headers, target=b"http://127.0.0.1:8080/v1/embeddings"))
    assert [a.status for a in got.answers] == [200], got.raw[:300]
    assert len(json.loads(got.answers[0].body)["data"]) == 1


@pytest.mark.parametrize("size", [b"1" + b"0" * 16, b"F" * 17, b"F" * 20])
def test_a_chunk_size_past_64_bits_is_a_400_at_once(port: int, size: bytes) -> None:
    # GIVEN a chunked body whose first chunk declares 2**64 bytes or more
    headers = HOST + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
    started = time.monotonic()
    got = exchange(port, post(headers, size + b"\r\n" + BODY), timeout=8)
    # THEN a 400 comes at once (not a 408 once the body's idle timeout has passed)
    assert [a.status for a in got.answers] == [400], got.raw[:300]
    assert got.closed
    assert time.monotonic() - started < 5
