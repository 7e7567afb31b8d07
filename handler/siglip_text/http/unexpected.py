"""An exception no one expected: what the log says of it (its type, place and scrubbed
message, never query text), and the OpenAI 500 that answers it, saying nothing of it.
Used by the front, the embeddings endpoint and the Lambda handler alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from ..engine.errors import SiglipError, scrubbed


class ErrorLog(Protocol):
    """Where an unexpected error is logged: a `logging.Logger` or Powertools' ``Logger``."""

    def error(
        self, msg: object, *args: object, extra: Mapping[str, object] | None = None
    ) -> None: ...


def unexpected_error(exc: BaseException, log: ErrorLog) -> SiglipError:
    """An exception no one expected: logged on ``log`` for the operator (`unexpected`: type,
    place, scrubbed message; no query text), and the error that answers it, a 500 that says
    nothing of it (`error_answer`)."""
    cause = unexpected(exc)
    log.error("answered 500: unexpected error: %s", cause, extra={"cause": cause})
    return SiglipError(f"unexpected error: {cause}")


def unexpected(exc: BaseException) -> str:
    """What an unexpected exception was, fit for a log: its type, the ``file:line`` of its
    innermost frame and its scrubbed message (the traceback stays out of the log: its last
    line repeats the message unscrubbed). Never sent to the client."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = "?"
    if tb is not None:
        where = f"{tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"
    return f"{type(exc).__name__} at {where}: {scrubbed(str(exc))}"
