"""ASGI's shapes and the few things the front's parts do with them: send an error answer,
remember whether a response has started, answer a HEAD without content."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ..engine.errors import SiglipError
from .errors import error_answer

# Any: ASGI's scope and messages are dicts whose values' types depend on their keys (the
# specification's tables); Starlette and uvicorn type them the same way.
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def send_error(send: Send, error: SiglipError, *, more_body: bool = False) -> None:
    """The OpenAI-shaped error, ``Connection: close``; ``more_body`` leaves it open to drain."""
    answer = error_answer(error)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(answer.body)).encode()),
        (b"connection", b"close"),
        *(
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in answer.headers.items()
            if name.lower() != "connection"  # sent above, once
        ),
    ]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body, "more_body": more_body})


class Tracked:
    """A send that remembers whether a response has started."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)


def without_body(send: Send) -> Send:
    """A send for a ``HEAD`` request: the answer's status and headers (its ``Content-Length``
    included, RFC 9110 section 9.3.2), never its content, whichever server is in front."""

    async def headers_only(message: Message) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            message = {**message, "body": b""}
        await send(message)

    return headers_only
