"""The end of `serve`: running and waiting requests go on for the grace period; when it
ends, every request not yet answered gets a 503 (``server_shutting_down``, ``Connection:
close``, ``Retry-After``), and ``on_expired`` is called once those answers are out.

`Shutdown.begin` is called when `serve`'s uvicorn stops accepting. Requests still reading
their bodies or waiting for a running slot hold a `window` (a timeout at the deadline) and
get their 503 from it, body drained; requests the app holds and has not answered are cut
here. The end waits on an event set each time a request leaves, never a busy poll.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from .asgi import send_error
from .body import DRAIN_IDLE_SECONDS, DRAIN_MAX_SECONDS
from .errors import status_for
from .exchange import Exchange, Stage
from .gate import shutting_down

logger = logging.getLogger("siglip_text.http.front")

#: Told about each request refused (status, code).
Refused = Callable[[int, str | None], None]


class Shutdown:
    """The requests with a body in progress, and the grace period once it has begun."""

    def __init__(self) -> None:
        self.active: set[Exchange] = set()
        self.expired = False
        self._deadline: float | None = None
        self._left: asyncio.Event | None = None  # set each time a request leaves

    @asynccontextmanager
    async def tracking(self, exchange: Exchange) -> AsyncIterator[None]:
        """Hold ``exchange`` in `active` while it lasts."""
        self.active.add(exchange)
        try:
            yield
        finally:
            self.active.discard(exchange)
            if self._left is not None:
                self._left.set()

    @asynccontextmanager
    async def window(self, exchange: Exchange) -> AsyncIterator[None]:
        """Raise TimeoutError in the body when the grace period ends (none: never)."""
        async with asyncio.timeout_at(self._deadline) as window:
            exchange.window = window
            try:
                yield
            finally:
                exchange.window = None

    def begin(
        self, grace_seconds: float, on_expired: Callable[[], None], refused: Refused
    ) -> asyncio.Task[None]:
        """Let admitted requests run for ``grace_seconds``; then answer the rest with 503."""
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + grace_seconds
        self._left = asyncio.Event()
        for exchange in self.active:
            if exchange.window is not None:
                exchange.window.reschedule(self._deadline)
        logger.info(
            "shutting down: %d request(s) with a body in progress, grace period %.1f s",
            len(self.active),
            grace_seconds,
        )
        return loop.create_task(self._expire_at(self._deadline, on_expired, refused))

    async def _expire_at(
        self, deadline: float, on_expired: Callable[[], None], refused: Refused
    ) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, deadline - loop.time()))
        self.expired = True
        cut = [ex for ex in self.active if ex.stage is Stage.RUNNING]
        for exchange in cut:
            # The body is read already: no drain; the computation is abandoned.
            exchange.stage = Stage.CUT
            error = shutting_down()
            exchange.cut_answer = loop.create_task(send_error(exchange.send, error))
            refused(status_for(error)[0], error.code)
        if cut:
            logger.warning("grace period over: %d running request(s) answered 503", len(cut))
        # Those still reading or waiting get their 503 from their own window (and drain).
        answers = [ex.cut_answer for ex in cut if ex.cut_answer is not None]
        give_up = loop.time() + DRAIN_MAX_SECONDS + DRAIN_IDLE_SECONDS
        if answers:
            await asyncio.wait(answers, timeout=max(0.0, give_up - loop.time()))
        assert self._left is not None
        while any(ex.stage is not Stage.CUT for ex in self.active):
            self._left.clear()
            try:
                await asyncio.wait_for(self._left.wait(), max(0.0, give_up - loop.time()))
            except TimeoutError:
                break
        on_expired()
