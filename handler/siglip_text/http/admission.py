"""Bounded admission: at most ``in_flight`` requests run, ``pending`` more may wait.

Past that a request is refused at once (OverloadedError -> 429 with Retry-After) instead of
joining an unbounded queue. A request holds two things: its *admission* (one of
``in_flight + pending``, taken or refused without waiting) for its whole life, and a
*running* slot (one of ``in_flight``, waited for) while it does its work. The front door
(`front.py`) takes the admission before it reads the body and the running slot before the
app parses it, on Lambda and under `serve` alike; ``slot()`` takes both at once. On Lambda
each environment serves one request at a time (the admission never refuses there) and the
function's reserved concurrency is the real bound.

When admission is full, `evict_a_slow_reader` makes room: the upload that has been arriving
longest, for at least `SLOW_READER_SECONDS` at less than `SLOW_READER_BYTES_PER_SECOND`, is
cut (408), so clients that trickle their bodies never keep a prompt one out (an ordinary
body arrives in milliseconds).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager

from .errors import OverloadedError
from .exchange import Exchange, Stage

#: When admission is full, a body that has been arriving for this long, at less than this
#: rate, is cut (408) to make room for the newcomer: a client trickling its body.
SLOW_READER_SECONDS = 1.0
SLOW_READER_BYTES_PER_SECOND = 16 * 1024


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


async def evict_a_slow_reader(exchanges: Iterable[Exchange]) -> bool:
    """Admission is full: cut the slowest long upload among ``exchanges`` (see the module
    docstring) and wait, briefly, for its place; False when none is slow enough."""
    now = asyncio.get_running_loop().time()
    readers = [
        ex
        for ex in exchanges
        if ex.stage is Stage.READING
        and ex.evict is not None
        and ex.upload is not None
        and now - ex.upload.since >= SLOW_READER_SECONDS
        and ex.upload.received < SLOW_READER_BYTES_PER_SECOND * (now - ex.upload.since)
    ]
    if not readers:
        return False
    victim = min(readers, key=lambda ex: ex.upload.since if ex.upload else now)
    assert victim.evict is not None
    victim.evict.reschedule(now)
    victim.stage = Stage.ARRIVED  # cut: no longer a reader another newcomer may pick
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(victim.released.wait(), 1.0)
    return True
