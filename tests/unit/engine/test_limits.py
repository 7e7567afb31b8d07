"""limits.py: the invocation's deadline, from the pace this process has measured."""

from __future__ import annotations

import pytest
from siglip_text.engine.errors import InsufficientTimeError
from siglip_text.engine.limits import Deadline, Pace


class Clock:
    def __init__(self, *values: int) -> None:
        self.values = list(values)

    def __call__(self) -> int:
        return self.values.pop(0) if len(self.values) > 1 else self.values[0]


def test_deadline_refuses_when_the_rest_cannot_finish_at_the_best_pace() -> None:
    pace = Pace()
    pace.record(3.2, 32)  # 0.1 s per input
    deadline = Deadline(Clock(10_000), reserve_s=0.5)
    deadline.check(rows_left=90, next_rows=32, total=90, pace=pace)  # 9 s of 9.5 s
    with pytest.raises(InsufficientTimeError) as stopped:
        deadline.check(rows_left=96, next_rows=32, total=96, pace=pace)  # 9.6 s
    assert "before the model ran" in stopped.value.message


def test_deadline_refuses_a_chunk_that_would_run_into_the_timeout() -> None:
    pace = Pace()
    pace.record(0.32, 32)  # best: 0.01 s per input
    pace.record(6.4, 32)  # last: 0.2 s per input (the host slowed down)
    deadline = Deadline(Clock(5_000), reserve_s=0.5)
    with pytest.raises(InsufficientTimeError) as stopped:
        deadline.check(rows_left=64, next_rows=32, total=96, pace=pace)
    assert "after 32 of 96 inputs" in stopped.value.message


def test_deadline_with_no_time_left_refuses_even_before_any_pace_is_known() -> None:
    with pytest.raises(InsufficientTimeError):
        Deadline(Clock(400), reserve_s=0.5).check(rows_left=1, next_rows=1, total=1, pace=Pace())
    Deadline(Clock(600), reserve_s=0.5).check(rows_left=1, next_rows=1, total=1, pace=Pace())
