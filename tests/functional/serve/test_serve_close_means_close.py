"""After an answer that closes the connection, `serve`'s protocol answers nothing more: the
protocol driven in-process, its bytes fed in a fixed order, so that a request arriving while
a refusal drains the body (the window a socket test can only hit by chance) is tested every
time, under each parser."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import uvicorn
from siglip_text.assembly import Platform, build_app
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.connections import guarded_protocol
from siglip_text.settings import Settings
from uvicorn.server import ServerState

from devkit.guarded_server import PARSERS, parse_answers, refuse_every_key, server_warnings

HOST = b"Host: 127.0.0.1\r\n"
BODY = b'{"input":["a red block"]}'
SECOND = b"GET /health HTTP/1.1\r\n" + HOST + b"\r\n"


class Transport:
    """What uvicorn's protocols use of an asyncio transport, writing into a buffer."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.closing = False

    def write(self, data: bytes) -> None:
        assert not self.closing, "written after the close"
        self.written += data

    def close(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(
            name, default
        )


async def drive(app: Any, parser: str, head: bytes) -> tuple[bytes, list[str]]:
    """Feed ``head`` and the body's first bytes; once the refusal is out, the rest of the
    body and, in the same turn of the loop, a second request; what was written and logged."""
    config = uvicorn.Config(app, log_level="warning", ws="none", lifespan="off")
    config.load()
    protocol_class = guarded_protocol(header_timeout=5, max_connections=8, parser=parser)  # type: ignore[arg-type]
    protocol: Any = protocol_class(config=config, server_state=ServerState(), app_state={})
    transport = Transport()
    with server_warnings() as warnings:
        protocol.connection_made(transport)
        protocol.data_received(head + BODY[:5])
        for _ in range(200):  # until the refusal's head is written (it drains the body)
            if b"\r\n\r\n" in transport.written:
                break
            await asyncio.sleep(0.005)
        protocol.data_received(BODY[5:])
        protocol.data_received(SECOND)
        await asyncio.sleep(0.2)
        protocol.connection_lost(None)
    return bytes(transport.written), warnings.lines


def post(headers: bytes) -> bytes:
    return (
        b"POST /v1/embeddings HTTP/1.1\r\n"
        + HOST
        + headers
        + b"Content-Length: %d\r\n\r\n" % len(BODY)
    )


@pytest.mark.parametrize("parser", PARSERS)
def test_a_request_sent_while_a_415_drains_gets_no_answer_and_no_warning(
    parser: str, service: EmbeddingService, settings: Settings
) -> None:
    app = build_app(service, settings, Platform.SERVE, host="127.0.0.1")
    written, warnings = asyncio.run(drive(app, parser, post(b"Content-Type: text/plain\r\n")))
    assert [a.status for a in parse_answers(written)] == [415], written[:400]
    assert not warnings, warnings


@pytest.mark.parametrize("parser", PARSERS)
def test_a_request_sent_while_a_401_drains_gets_no_answer_and_no_warning(
    parser: str, service: EmbeddingService, settings: Settings
) -> None:
    app = build_app(
        service, settings, Platform.SERVE, host="127.0.0.1", authenticator=refuse_every_key
    )
    head = post(b"Content-Type: application/json\r\nAuthorization: Bearer sk-wrong\r\n")
    written, warnings = asyncio.run(drive(app, parser, head))
    assert [a.status for a in parse_answers(written)] == [401], written[:400]
    assert not warnings, warnings
