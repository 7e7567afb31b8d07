"""Request bodies, bounded: read one whole (by size and by time), drop one refused, hand one
read to the app.

A body is read counting (over the limit: a 413 at once) within an idle and a total timeout
(408: a client that trickles its body gives its place back). An answer given before the body
is read (401, 404, 405, 413, 415, 429, 503) is written first, then the rest of the body is
read and dropped, up to `DRAIN_MAX_BYTES` and `DRAIN_MAX_SECONDS`, before the connection is
closed: closing a socket with unread data makes the kernel send a reset, which destroys the
answer at clients that send their whole body before they read (Python's ``urllib``,
``requests``). nginx's "lingering close" does the same.
"""

from __future__ import annotations

import asyncio
import contextlib

from .asgi import Message, Receive
from .errors import RequestTimeoutError, body_too_large
from .exchange import Upload

#: The most of a refused body read and dropped, and for how long (then the connection is
#: closed, and a client still sending gets a reset). nginx lingers up to 30 s.
DRAIN_MAX_BYTES = 64 * 1024 * 1024
DRAIN_MAX_SECONDS = 10.0
#: A client that sends nothing for this long has stopped sending (``Expect: 100-continue``).
DRAIN_IDLE_SECONDS = 2.0


async def read_body(
    receive: Receive,
    *,
    max_bytes: int,
    idle_seconds: float,
    total_seconds: float,
    upload: Upload | None = None,
) -> bytes | None:
    """The whole body, or None if the client disconnected; 413 once past ``max_bytes``, 408
    when the client sends nothing for ``idle_seconds`` or is not done after
    ``total_seconds``. ``upload`` is kept up to date, for whoever watches the read."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + total_seconds
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - loop.time()
        wait = min(idle_seconds, left)
        try:
            message = await asyncio.wait_for(receive(), max(wait, 0.0))
        except TimeoutError:
            which = "sent nothing for" if wait < left else "was not complete after"
            seconds = idle_seconds if wait < left else total_seconds
            raise RequestTimeoutError(
                f"the request body {which} {seconds:g} seconds; send it at once"
            ) from None
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        more = bool(message.get("more_body", False))
        if upload is not None:
            upload.received, upload.complete = size, not more
        if size > max_bytes:
            raise body_too_large(max_bytes)
        if chunk:
            chunks.append(chunk)
        if not more:
            return b"".join(chunks)


async def drain(receive: Receive) -> None:
    """Read and drop the rest of a body: up to the bounds, or until the client stops."""
    drained = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_MAX_SECONDS):
            while drained <= DRAIN_MAX_BYTES:
                message = await asyncio.wait_for(receive(), DRAIN_IDLE_SECONDS)
                if message["type"] != "http.request":
                    return
                drained += len(message.get("body", b""))
                if not message.get("more_body", False):
                    return


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the app the body already read, then the connection's events."""
    pending: list[bytes] = [body]

    async def replayed() -> Message:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        return await receive()

    return replayed
