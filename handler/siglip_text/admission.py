"""Bounded admission: at most ``in_flight`` requests run, ``pending`` more may wait.

Past that a request is refused at once (OverloadedError -> 429 with Retry-After) instead of
joining an unbounded queue. On Lambda each environment serves one request at a time and the
function's reserved concurrency is the real bound; this bound matters for `siglip-text serve`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .errors import OverloadedError


class Admission:
    """Counts admitted requests; all state lives on the event loop, so no lock is needed."""

    def __init__(self, *, in_flight: int, pending: int) -> None:
        self.in_flight = in_flight
        self.capacity = in_flight + pending
        self.admitted = 0
        self.refused = 0
        self._running: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one running slot for the body; raise OverloadedError when full."""
        if self.admitted >= self.capacity:
            self.refused += 1
            raise OverloadedError(
                "the server is at capacity; retry after the delay in the Retry-After header"
            )
        loop = asyncio.get_running_loop()
        if self._running is None or self._loop is not loop:
            # Mangum may run each invocation on its own loop; a semaphore is bound to one.
            self._running, self._loop = asyncio.Semaphore(self.in_flight), loop
        self.admitted += 1
        try:
            async with self._running:
                yield
        finally:
            self.admitted -= 1
