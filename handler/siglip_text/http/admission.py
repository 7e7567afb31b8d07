"""Bounded admission: at most ``in_flight`` requests run, ``pending`` more may wait.

Past that a request is refused at once (OverloadedError -> 429 with Retry-After) instead of
joining an unbounded queue. A request holds two things: its *admission* (one of
``in_flight + pending``, taken or refused without waiting) for its whole life, and a
*running* slot (one of ``in_flight``, waited for) while it does its work. The front door
(`front.py`) takes the admission before it reads the body and the running slot before the
app parses it, on Lambda and under `serve` alike; ``slot()`` takes both at once. On Lambda
each environment serves one request at a time (the admission never refuses there) and the
function's reserved concurrency is the real bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from ..engine.errors import OverloadedError


class Admission:
    """Counts admitted requests; all state lives on the event loop, so no lock is needed."""

    def __init__(self, *, in_flight: int, pending: int) -> None:
        self.in_flight = in_flight
        self.capacity = in_flight + pending
        self.admitted = 0
        self.refused = 0
        self._running: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @contextmanager
    def admit(self) -> Iterator[None]:
        """Hold one of ``in_flight + pending`` places; raise OverloadedError when all are held."""
        if self.admitted >= self.capacity:
            self.refused += 1
            raise OverloadedError(
                "the server is at capacity; retry after the delay in the Retry-After header"
            )
        self.admitted += 1
        try:
            yield
        finally:
            self.admitted -= 1

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Wait for one of ``in_flight`` running slots and hold it (call within ``admit()``)."""
        loop = asyncio.get_running_loop()
        if self._running is None or self._loop is not loop:
            # Mangum may run each invocation on its own loop; a semaphore is bound to one.
            self._running, self._loop = asyncio.Semaphore(self.in_flight), loop
        async with self._running:
            yield

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Admission and a running slot at once; raise OverloadedError when full."""
        with self.admit():
            async with self.running():
                yield
