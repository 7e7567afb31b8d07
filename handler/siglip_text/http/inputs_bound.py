"""The most inputs one request may hold: the setting, or what this deployment can answer.

With ``SIGLIP_MAX_INPUTS_PER_REQUEST=auto`` (the default) the bound is derived once, when the
app is built (after the init), from two limits of the platform in front:

- **the response**: the most inputs whose answer fits the frontend's response limit
  (Lambda's 6 MB synchronous response), at the bundle's dimension, as float JSON: the larger
  of the two encodings per vector (base64 fits about 3.2 times more), so that one bound holds
  whatever ``encoding_format`` a client sends (`response_size.inputs_that_fit`);
- **the time**: the most inputs whose compute fits the function's timeout at the pace the
  init's probe measured on this CPU (`limits.inputs_in_time`), so that the bound follows the
  bundle's size and the function's memory (memory buys vCPUs, vCPUs set the pace).

Each applies only where the platform has it: `serve` has no response limit (unless
``SIGLIP_MAX_RESPONSE_BYTES`` names a proxy's) and no timeout (unless
``SIGLIP_FUNCTION_TIMEOUT_SECONDS`` names one), so there the bound is OpenAI's own 2048,
the batch its clients already send. A number in the setting is the bound as it stands; the
response check and the deadline still refuse what could not be answered.

A request past the bound is a 413 (`TooManyInputsError`) whose message states the bound, what
set it and how to set a client's batch size; ``GET /health`` and ``GET /v1/models`` state it
as ``max_inputs_per_request``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.limits import TIME_SHARE, inputs_in_time
from ..engine.service import EmbeddingService
from ..settings import ENV_PREFIX, Settings
from .response_size import inputs_that_fit

#: OpenAI's own limit of inputs per request: what its clients batch by, and the bound where
#: nothing in front of the service limits it.
OPENAI_MAX_INPUTS = 2048
#: Where a client's batch-size setting is documented, per client.
BATCH_SIZE_DOCS = "docs/clients.md#batch-size"


@dataclass(frozen=True)
class InputsBound:
    """The most inputs a request may hold, and what set it.

    ``by_response`` and ``by_time`` are the derived limits (None where the platform has no
    such limit, or where the setting gave the bound and they were not derived).
    """

    value: int
    basis: str
    by_response: int | None = None
    by_time: int | None = None

    def refusal(self, inputs: int) -> str:
        """The 413's message for a request of ``inputs`` inputs."""
        return (
            f"'input' has {inputs} items; this endpoint answers at most {self.value} per "
            f"request ({self.basis}): set your client's batch size to {self.value} or fewer "
            f"({BATCH_SIZE_DOCS}; GET /health: max_inputs_per_request)"
        )


def derive_inputs_bound(
    service: EmbeddingService, settings: Settings, *, response_limit: int | None
) -> InputsBound:
    """The bound for this service behind a frontend whose answers are limited to
    ``response_limit`` bytes (None: no limit)."""
    setting = settings.max_inputs_per_request
    if setting != "auto":
        return InputsBound(setting, f"{ENV_PREFIX}MAX_INPUTS_PER_REQUEST={setting}")
    reasons = [(OPENAI_MAX_INPUTS, "OpenAI's own limit per request")]
    by_response = by_time = None
    if response_limit is not None:
        by_response = inputs_that_fit(
            response_limit,
            dimension=service.dimension,
            encoding="float",
            model=service.model_id,
            max_tokens=service.max_tokens,
        )
        reasons.append(
            (
                by_response,
                f"{service.dimension}-d float vectors in the "
                f"{response_limit:,}-byte response limit",
            )
        )
    timeout_s = settings.function_timeout_seconds
    pace = service.probe_seconds_per_input
    if timeout_s is not None and pace is not None:
        by_time = inputs_in_time(
            timeout_s=timeout_s,
            reserve_s=settings.time_reserve_ms / 1000.0,
            seconds_per_input=pace,
        )
        reasons.append(
            (
                by_time,
                f"what {TIME_SHARE:.0%} of the {timeout_s:g} s timeout compute at the "
                f"{pace * 1000:.2f} ms per input measured at init",
            )
        )
    value, basis = min(reasons, key=lambda reason: reason[0])
    return InputsBound(max(1, value), basis, by_response=by_response, by_time=by_time)
