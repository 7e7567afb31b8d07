"""Cost per million queries on Lambda behind each frontend, from measured latency.

Prices (us-east-1, docs/contract.md section 3): Lambda $0.0000166667 per GB-s on x86_64 and
$0.0000133334 on arm64, $0.20 per million requests. The frontend adds its own per-request
price: an API Gateway REST API $3.50 per million (the first 333 million a month), an HTTP API
$1.00 (the first 300 million, per 512 KB), a Lambda function URL nothing. Lambda bills
duration rounded up to the millisecond.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from siglip_text.aws.sizing import LAMBDA_MB_PER_VCPU

GB_SECOND_USD = {"x86_64": 0.0000166667, "arm64": 0.0000133334}
LAMBDA_REQUEST_USD_PER_MILLION = 0.20
#: What each frontend adds per million requests. template.yaml deploys rest-api or
#: function-url (its Frontend parameter); http-api is priced for comparison.
FRONTEND_USD_PER_MILLION = {"rest-api": 3.50, "http-api": 1.00, "function-url": 0.0}
FRONTEND_LABEL = {"rest-api": "REST API", "http-api": "HTTP API", "function-url": "function URL"}
ARCHITECTURES = ("x86_64", "arm64")


@dataclass(frozen=True)
class Cost:
    memory_mb: int
    architecture: str
    frontend: str
    billed_ms: int
    lambda_compute_usd: float
    lambda_requests_usd: float
    frontend_usd: float

    @property
    def lambda_usd(self) -> float:
        return self.lambda_compute_usd + self.lambda_requests_usd

    @property
    def total_usd(self) -> float:
        return self.lambda_usd + self.frontend_usd


def vcpus(memory_mb: int) -> float:
    """Lambda's CPU share grows linearly with memory: one full vCPU at 1,769 MB."""
    return memory_mb / LAMBDA_MB_PER_VCPU


def cost_per_million(
    latency_ms: float,
    *,
    memory_mb: int,
    architecture: str = "x86_64",
    frontend: str = "rest-api",
) -> Cost:
    """Dollars per million requests that each take ``latency_ms`` of billed duration."""
    billed_ms = max(1, math.ceil(latency_ms))
    gb_seconds = memory_mb / 1024 * billed_ms / 1000
    return Cost(
        memory_mb=memory_mb,
        architecture=architecture,
        frontend=frontend,
        billed_ms=billed_ms,
        lambda_compute_usd=gb_seconds * GB_SECOND_USD[architecture] * 1_000_000,
        lambda_requests_usd=LAMBDA_REQUEST_USD_PER_MILLION,
        frontend_usd=FRONTEND_USD_PER_MILLION[frontend],
    )


def latency_at_memory(latency_by_threads: dict[int, float], memory_mb: int) -> float:
    """Estimate a query's latency at a memory size from latencies measured per thread count.

    Below one vCPU the function gets a time slice of one core, so a 1-thread latency
    stretches by 1769 / memory. At k or more vCPUs the k-thread latency applies (the best
    measured thread count not above the share). Measured thread counts are the machine's
    limit: larger memory sizes are assumed no faster than the most threads measured.
    """
    share = vcpus(memory_mb)
    if share < 1:
        return latency_by_threads[1] / share
    usable = [t for t in latency_by_threads if t <= share]
    return min(latency_by_threads[t] for t in usable)


@dataclass(frozen=True)
class Option:
    """One way to deploy: a bundle's precision at a memory size, and its estimated latency."""

    precision: str
    memory_mb: int
    latency_ms: float

    def cost(self, architecture: str, frontend: str) -> Cost:
        return cost_per_million(
            self.latency_ms,
            memory_mb=self.memory_mb,
            architecture=architecture,
            frontend=frontend,
        )


def options(
    latency_by_precision: dict[str, dict[int, float]], memory_sizes: Iterable[int]
) -> list[Option]:
    """Every (precision, memory) pair with its estimated single-query latency."""
    sizes = list(memory_sizes)
    return [
        Option(name, memory, latency_at_memory(by_threads, memory))
        for name, by_threads in latency_by_precision.items()
        for memory in sizes
    ]


def cheapest_within(
    candidates: Iterable[Option], budget_ms: float, *, architecture: str, frontend: str
) -> Option | None:
    """The cheapest option whose estimated latency meets the budget (None if none does).

    Ties go to the faster option. The frontend's per-request price is the same for every
    option, so the choice of memory and precision does not depend on it; its total does.
    """
    fitting = [o for o in candidates if o.latency_ms <= budget_ms]
    if not fitting:
        return None
    return min(fitting, key=lambda o: (o.cost(architecture, frontend).total_usd, o.latency_ms))
