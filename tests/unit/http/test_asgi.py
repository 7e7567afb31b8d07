"""http/asgi.py: the error answer in ASGI messages, the tracked send, the send for HEAD."""

from __future__ import annotations

import asyncio
import json

from siglip_text.engine.errors import InvalidInputError
from siglip_text.http.asgi import Message, Tracked, send_error, without_body


class Sent:
    """A send that keeps what it is given."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def __call__(self, message: Message) -> None:
        self.messages.append(message)


def test_send_error_writes_the_openai_error_with_its_length_and_connection_close() -> None:
    sent = Sent()
    # WHEN an invalid-request error is sent
    asyncio.run(send_error(sent, InvalidInputError("no input", param="input")))
    start, body = sent.messages
    # THEN one start and one complete body: the status, the length of the body, one close
    assert start["status"] == 400
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"content-length"] == str(len(body["body"])).encode()
    assert [name for name, _ in start["headers"]].count(b"connection") == 1
    error = json.loads(body["body"])["error"]
    assert error["message"] == "no input" and error["param"] == "input"
    assert body["more_body"] is False


def test_send_error_can_leave_the_body_open_for_a_drain() -> None:
    sent = Sent()
    asyncio.run(send_error(sent, InvalidInputError("x"), more_body=True))
    assert sent.messages[-1]["more_body"] is True


def test_tracked_knows_once_a_response_has_started() -> None:
    sent = Sent()
    tracked = Tracked(sent)
    assert tracked.started is False
    asyncio.run(tracked.send({"type": "http.response.start", "status": 200, "headers": []}))
    assert tracked.started is True and len(sent.messages) == 1


def test_without_body_drops_the_content_and_keeps_the_headers() -> None:
    sent = Sent()
    head = without_body(sent)
    start = {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]}
    asyncio.run(head(start))
    asyncio.run(head({"type": "http.response.body", "body": b"hello"}))
    # THEN the length is announced, no content follows
    assert sent.messages[0] == start
    assert sent.messages[1]["body"] == b""
