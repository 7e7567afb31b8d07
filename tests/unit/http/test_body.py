"""http/body.py: a body read whole within its bounds of size and time, a refused body
drained, a body read once handed to the app."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from siglip_text.engine.errors import SiglipError
from siglip_text.http.asgi import Message
from siglip_text.http.body import drain, read_body, replay
from siglip_text.http.exchange import Upload


def chunks(*parts: bytes, then_hang: bool = False) -> Callable[[], Awaitable[Message]]:
    """A receive that gives ``parts`` (the last one complete unless ``then_hang``), then
    waits for ever, as a client that stopped sending."""
    queue = [
        {"type": "http.request", "body": part, "more_body": then_hang or i < len(parts) - 1}
        for i, part in enumerate(parts)
    ]

    async def receive() -> Message:
        if queue:
            return queue.pop(0)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return receive


def read(receive: Callable[[], Awaitable[Message]], **bounds: float) -> bytes | None:
    limits = {"max_bytes": 100, "idle_seconds": 1.0, "total_seconds": 5.0, **bounds}
    return asyncio.run(read_body(receive, **limits))  # type: ignore[arg-type]


def test_a_body_in_chunks_is_read_whole_and_the_upload_follows_it() -> None:
    upload = Upload(since=0.0)
    body = asyncio.run(
        read_body(
            chunks(b"ab", b"", b"cd"),
            max_bytes=4,
            idle_seconds=1.0,
            total_seconds=5.0,
            upload=upload,
        )
    )
    assert body == b"abcd"
    assert (upload.received, upload.complete) == (4, True)


def test_one_byte_over_the_limit_is_a_413_before_the_rest_is_read() -> None:
    with pytest.raises(SiglipError) as raised:
        read(chunks(b"x" * 60, b"x" * 41, b"never read"), max_bytes=100)
    assert raised.value.code == "payload_too_large"
    assert "100 bytes" in str(raised.value)


def test_a_client_that_stops_sending_gets_a_408_naming_the_idle_timeout() -> None:
    with pytest.raises(SiglipError) as raised:
        read(chunks(b"start", then_hang=True), idle_seconds=0.05)
    assert raised.value.code == "request_timeout"
    assert "sent nothing for 0.05 seconds" in str(raised.value)


def test_a_client_that_trickles_past_the_total_gets_a_408_naming_the_total() -> None:
    async def trickle() -> Message:
        await asyncio.sleep(0.02)
        return {"type": "http.request", "body": b"x", "more_body": True}

    with pytest.raises(SiglipError) as raised:
        read(trickle, max_bytes=10_000, idle_seconds=1.0, total_seconds=0.2)
    assert "was not complete after 0.2 seconds" in str(raised.value)


def test_a_disconnect_before_the_end_is_no_body() -> None:
    events = [
        {"type": "http.request", "body": b"a", "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> Message:
        return events.pop(0)

    assert read(receive) is None


def test_drain_reads_the_rest_of_a_refused_body_to_its_end_and_no_further() -> None:
    events = [
        {"type": "http.request", "body": b"1", "more_body": True},
        {"type": "http.request", "body": b"2", "more_body": False},
        {"type": "http.request", "body": b"next request", "more_body": False},
    ]

    async def receive() -> Message:
        return events.pop(0)

    asyncio.run(drain(receive))
    # THEN the body's two chunks were read and dropped, nothing after them
    assert [e["body"] for e in events] == [b"next request"]


def test_replay_gives_the_body_read_then_the_connections_own_events() -> None:
    async def disconnect() -> Message:
        return {"type": "http.disconnect"}

    replayed = replay(b"payload", disconnect)

    async def both() -> tuple[Message, Message]:
        return await replayed(), await replayed()

    first, second = asyncio.run(both())
    assert first == {"type": "http.request", "body": b"payload", "more_body": False}
    assert second == {"type": "http.disconnect"}
