from __future__ import annotations

import asyncio

import pytest
from siglip_text.admission import Admission
from siglip_text.errors import OverloadedError


def test_requests_beyond_in_flight_plus_pending_are_refused_at_once() -> None:
    admission = Admission(in_flight=1, pending=1)

    async def scenario() -> list[str]:
        release = asyncio.Event()
        events: list[str] = []

        async def hold(name: str) -> None:
            try:
                async with admission.slot():
                    events.append(f"run {name}")
                    await release.wait()
            except OverloadedError:
                events.append(f"refused {name}")

        tasks = [asyncio.create_task(hold(n)) for n in "abc"]
        await asyncio.sleep(0.01)
        release.set()
        await asyncio.gather(*tasks)
        return events

    events = asyncio.run(scenario())
    assert events[:2] == ["run a", "refused c"]
    assert "run b" in events
    assert admission.admitted == 0 and admission.refused == 1


def test_slot_is_released_when_the_body_raises() -> None:
    admission = Admission(in_flight=1, pending=0)

    async def scenario() -> None:
        with pytest.raises(ValueError):
            async with admission.slot():
                raise ValueError("boom")
        async with admission.slot():
            pass

    asyncio.run(scenario())
    assert admission.admitted == 0
