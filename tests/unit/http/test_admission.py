from __future__ import annotations

import asyncio

import pytest
from siglip_text.http.admission import Admission
from siglip_text.http.errors import OverloadedError


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


def test_admission_never_waits_and_running_slots_are_waited_for_in_turn() -> None:
    # GIVEN one running slot and one pending place
    admission = Admission(in_flight=1, pending=1)

    async def scenario() -> list[str]:
        events: list[str] = []
        release = asyncio.Event()

        async def request(name: str) -> None:
            try:
                with admission.admit():
                    events.append(f"admitted {name}")
                    await asyncio.sleep(0)  # e.g. reading the body
                    async with admission.running():
                        events.append(f"run {name}")
                        await release.wait()
            except OverloadedError:
                events.append(f"refused {name}")

        tasks = [asyncio.create_task(request(n)) for n in "abc"]
        await asyncio.sleep(0.01)
        # THEN a runs, b is admitted and waits, c is refused without waiting
        assert events == ["admitted a", "admitted b", "refused c", "run a"]
        assert admission.admitted == 2
        release.set()
        await asyncio.gather(*tasks)
        return events

    events = asyncio.run(scenario())
    # AND b runs once a is done; every place is given back
    assert events[-1] == "run b"
    assert admission.admitted == 0 and admission.refused == 1
