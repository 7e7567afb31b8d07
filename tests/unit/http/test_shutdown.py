"""http/shutdown.py: the grace period, then a 503 for each request the app still holds."""

from __future__ import annotations

import asyncio
import json

import pytest
from siglip_text.http.asgi import Message
from siglip_text.http.exchange import Exchange, Stage
from siglip_text.http.shutdown import Shutdown


class Seen:
    """What a shutdown did to one request: the messages sent, the refusals counted, the ends."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.refused: list[tuple[int, str | None]] = []
        self.expired: list[bool] = []

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    def begin(self, shutdown: Shutdown, grace_seconds: float) -> asyncio.Task[None]:
        return shutdown.begin(
            grace_seconds,
            lambda: self.expired.append(True),
            lambda s, c: self.refused.append((s, c)),
        )


def held_through_a_shutdown(
    stage: Stage, grace_seconds: float, held_seconds: float
) -> tuple[Seen, Shutdown, Exchange, bool]:
    """A request at ``stage`` held for ``held_seconds`` after a shutdown with
    ``grace_seconds`` begins: what it was sent, the shutdown, the request, and whether the
    end came while it was still held."""
    seen, shutdown = Seen(), Shutdown()
    exchange = Exchange(send=seen.send, stage=stage)

    async def scenario() -> bool:
        async with shutdown.tracking(exchange):
            task = seen.begin(shutdown, grace_seconds)
            await asyncio.sleep(held_seconds)
            ended_while_held = bool(seen.expired)
        await asyncio.wait_for(task, 5)
        return ended_while_held

    return seen, shutdown, exchange, asyncio.run(scenario())


def test_a_running_request_is_cut_with_a_503_when_the_grace_period_ends() -> None:
    # WHEN the shutdown begins with a short grace period and the app never answers
    seen, _, running, ended_while_held = held_through_a_shutdown(Stage.RUNNING, 0.05, 0.2)
    # THEN its answer is a 503 in OpenAI's shape, counted once, and the end is called once,
    # without waiting for the app
    assert running.stage is Stage.CUT and ended_while_held
    assert seen.sent[0]["status"] == 503
    assert json.loads(seen.sent[1]["body"])["error"]["code"] == "server_shutting_down"
    assert seen.refused == [(503, "server_shutting_down")]
    assert seen.expired == [True]


def test_an_answered_request_is_left_alone_and_the_end_comes_when_it_leaves() -> None:
    seen, shutdown, answered, ended_while_held = held_through_a_shutdown(Stage.ANSWERED, 0.01, 0.05)
    assert answered.stage is Stage.ANSWERED and not ended_while_held
    assert shutdown.expired and not shutdown.active
    assert seen.sent == [] and seen.expired == [True] and seen.refused == []


def test_the_window_of_a_request_still_reading_closes_at_the_deadline() -> None:
    async def scenario() -> None:
        shutdown = Shutdown()
        reading = Exchange(send=Seen().send, stage=Stage.READING)
        async with shutdown.tracking(reading):
            with pytest.raises(TimeoutError):
                async with shutdown.window(reading):
                    assert reading.window is not None
                    shutdown.begin(0.01, lambda: None, lambda s, c: None)
                    await asyncio.sleep(5)
            assert reading.window is None

    asyncio.run(scenario())
