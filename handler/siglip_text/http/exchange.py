"""One request with a body, from its arrival until its answer is out: its stage (one enum,
as Mangum's ``HTTPCycleState``), the progress of its body, and the handles the front's parts
use to cut it short (eviction of a slow reader, the end of the shutdown grace period)."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field

from .asgi import Message, Send


class Stage(enum.Enum):
    """Where a request with a body stands."""

    #: Admitted (or about to be refused), its body not yet being read.
    ARRIVED = enum.auto()
    #: Its body is being read; a newcomer finding the server full may evict it.
    READING = enum.auto()
    #: Its body is read; it waits for a running slot.
    WAITING = enum.auto()
    #: The app has it and has not started its answer: the end of the grace period cuts it.
    RUNNING = enum.auto()
    #: An answer has started (the app's, or a refusal here): nothing may cut it.
    ANSWERED = enum.auto()
    #: Answered here with a 503 when the grace period ended; the app's answer is dropped.
    CUT = enum.auto()


@dataclass
class Upload:
    """How a body's reading is going: when it began, bytes so far, whether it is complete."""

    since: float
    received: int = 0
    complete: bool = False


@dataclass(eq=False)
class Exchange:
    """One request with a body (see the module docstring)."""

    send: Send
    stage: Stage = Stage.ARRIVED
    upload: Upload | None = None  # while its body is being read
    #: Cuts the body read short (`admission.evict_a_slow_reader`), while reading.
    evict: asyncio.Timeout | None = None
    #: The shutdown deadline, while reading or waiting (`shutdown.Shutdown.window`).
    window: asyncio.Timeout | None = None
    #: The 503 sent at the end of the grace period, once cut.
    cut_answer: asyncio.Task[None] | None = None
    #: Set once its admission is given back.
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def answer(self) -> bool:
        """Mark that an answer starts now; False if it was cut (its 503 is out already)."""
        if self.stage is Stage.CUT:
            return False
        self.stage = Stage.ANSWERED
        return True

    def guarded(self) -> Send:
        """The app's send: marks the answer started; drops it once cut."""

        async def send(message: Message) -> None:
            if self.stage is Stage.CUT:
                return
            if message["type"] == "http.response.start":
                self.stage = Stage.ANSWERED
            await self.send(message)

        return send
