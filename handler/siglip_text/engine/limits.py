"""The invocation's remaining time: whether a request's compute can still finish.

`Deadline` holds the invocation's clock (the Lambda context's ``get_remaining_time_in_millis``).
The service asks it before tokenizing, the encoder before each chunk of the batch: it stops
the request (`InsufficientTimeError`) when the rest cannot finish in the time left even at
the best pace this process has measured (`Pace`), or when the next chunk at the last chunk's
pace would run into the timeout. Lambda would otherwise end the invocation with a timeout,
which API Gateway answers with a 5xx that OpenAI clients retry (three billed timeouts).
Sending the request again unchanged gets the same refusal: it must be split.
"""

from __future__ import annotations

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
