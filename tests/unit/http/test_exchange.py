"""http/exchange.py: one request's stage, and the send the app is given."""

from __future__ import annotations

import asyncio

from siglip_text.http.asgi import Message
from siglip_text.http.exchange import Exchange, Stage


def exchange_and_sent() -> tuple[Exchange, list[Message]]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    return Exchange(send=send), sent


def test_an_exchange_arrives_with_no_upload_and_is_not_released() -> None:
    exchange, _ = exchange_and_sent()
    assert exchange.stage is Stage.ARRIVED
    assert exchange.upload is None and not exchange.released.is_set()


def test_answer_marks_the_answer_started_unless_it_was_cut() -> None:
    exchange, _ = exchange_and_sent()
    assert exchange.answer() is True and exchange.stage is Stage.ANSWERED
    cut, _ = exchange_and_sent()
    cut.stage = Stage.CUT
    # THEN a cut exchange stays cut: its 503 is out already
    assert cut.answer() is False and cut.stage is Stage.CUT


def test_the_guarded_send_marks_the_start_and_passes_the_messages_on() -> None:
    exchange, sent = exchange_and_sent()
    exchange.stage = Stage.RUNNING
    send = exchange.guarded()
    asyncio.run(send({"type": "http.response.start", "status": 200, "headers": []}))
    assert exchange.stage is Stage.ANSWERED and len(sent) == 1


def test_the_guarded_send_drops_the_apps_answer_once_cut() -> None:
    exchange, sent = exchange_and_sent()
    exchange.stage = Stage.CUT
    asyncio.run(exchange.guarded()({"type": "http.response.start", "status": 200}))
    assert sent == [] and exchange.stage is Stage.CUT


def test_exchanges_are_told_apart_by_identity() -> None:
    # the shutdown holds them in a set: two of equal fields are two requests
    one, _ = exchange_and_sent()
    other = Exchange(send=one.send)
    assert len({one, other}) == 2
