"""The invocation's remaining time: whether a request's compute can still finish.

`Deadline` holds the invocation's clock (the Lambda context's ``get_remaining_time_in_millis``).
The service asks it before tokenizing, the encoder before each chunk of the batch: it stops
the request (`InsufficientTimeError`) when the rest cannot finish in the time left even at
the best pace this process has measured (`Pace`), or when the next chunk at the last chunk's
pace would run into the timeout. Lambda would otherwise end the invocation with a timeout,
which API Gateway answers with a 5xx that OpenAI clients retry (three billed timeouts).
Sending the request again unchanged gets the same refusal: it must be split.

`inputs_in_time` is the same knowledge ahead of any request: how many inputs fit a timeout at
the pace the init's probe measured, the time side of the most inputs a request may hold
(``http/inputs_bound.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .errors import InsufficientTimeError


@dataclass
class Pace:
    """Seconds per input measured on this process's model: the best seen, and the last."""

    best: float | None = None
    last: float | None = None

    def record(self, seconds: float, rows: int) -> None:
        if rows <= 0:
            return
        per_row = seconds / rows
        self.last = per_row
        self.best = per_row if self.best is None else min(self.best, per_row)


@dataclass(frozen=True)
class Deadline:
    """The time one invocation has left, and what to keep of it for the answer.

    ``remaining_ms`` is the Lambda context's ``get_remaining_time_in_millis``; ``reserve_s``
    covers what follows the model: serializing the answer, Mangum, the metrics flush and the
    runtime's return of up to 6 MB.
    """

    remaining_ms: Callable[[], int]
    reserve_s: float

    def check(self, *, rows_left: int, next_rows: int, total: int, pace: Pace) -> None:
        """Raise `InsufficientTimeError` if the rows left cannot be computed in time."""
        left = self.remaining_ms() / 1000.0 - self.reserve_s
        done = total - rows_left
        cannot_finish = left <= 0 or (pace.best is not None and rows_left * pace.best > left)
        next_overruns = pace.last is not None and next_rows * pace.last > left
        if not (cannot_finish or next_overruns):
            return
        need = rows_left * (pace.best or 0.0)
        where = "before the model ran" if done == 0 else f"after {done} of {total} inputs"
        raise InsufficientTimeError(
            f"this request cannot finish within the invocation's time limit: it stopped "
            f"{where}, with {max(left, 0.0):.2f} s left for at least {need:.2f} s of work; "
            "split it into smaller requests (retrying it unchanged is likely to stop again)",
            param="input",
        )


#: The share of a timeout (less the reserve) that a request of the most inputs may spend on
#: the model: the rest covers a cold init, which a gateway counts in its own timeout (API
#: Gateway's 29 s runs from the request, init included), and a pace slower than the probe's
#: (a request's first inputs read token-table rows from the image; neighbours share the CPU).
TIME_SHARE = 2 / 3
#: A time bound is rounded down to a multiple of this, so that environments whose probes
#: measured nearly the same pace state the same bound.
TIME_BOUND_STEP = 16


def inputs_in_time(*, timeout_s: float, reserve_s: float, seconds_per_input: float) -> int:
    """The most inputs whose compute fits `TIME_SHARE` of ``timeout_s`` less ``reserve_s``
    at ``seconds_per_input`` (the init's probe: one input per run, so a conservative pace for
    a batch), rounded down to a multiple of `TIME_BOUND_STEP` when there are that many; at
    least 1 (a single input is always tried: the deadline still stops it if it cannot end).
    """
    budget = max(timeout_s - reserve_s, 0.0) * TIME_SHARE
    # A clock's tick as the floor: a pace of 0 would be no bound at all.
    fits = math.floor(budget / max(seconds_per_input, 1e-6))
    if fits >= TIME_BOUND_STEP:
        fits -= fits % TIME_BOUND_STEP
    return max(1, fits)
