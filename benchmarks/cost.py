"""Cost per million queries on Lambda + API Gateway, from measured latency.

Prices (us-east-1, docs/contract.md section 3): Lambda $0.0000166667 per GB-s on x86_64 and
$0.0000133334 on arm64, $0.20 per million requests; API Gateway REST $3.50 per million
(HTTP API $1.00). Lambda bills duration rounded up to the millisecond.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GB_SECOND_USD = {"x86_64": 0.0000166667, "arm64": 0.0000133334}
LAMBDA_REQUEST_USD_PER_MILLION = 0.20
API_GATEWAY_USD_PER_MILLION = {"rest": 3.50, "http": 1.00}
MB_PER_VCPU = 1769


@dataclass(frozen=True)
class Cost:
    memory_mb: int
    architecture: str
    billed_ms: int
    lambda_compute_usd: float
    lambda_requests_usd: float
    api_gateway_usd: float

    @property
    def total_usd(self) -> float:
        return self.lambda_compute_usd + self.lambda_requests_usd + self.api_gateway_usd


def vcpus(memory_mb: int) -> float:
    """Lambda's CPU share grows linearly with memory: one full vCPU at 1,769 MB."""
    return memory_mb / MB_PER_VCPU


def cost_per_million(
    latency_ms: float, *, memory_mb: int, architecture: str = "x86_64", api: str = "rest"
) -> Cost:
    """Dollars per million requests that each take ``latency_ms`` of billed duration."""
    billed_ms = max(1, math.ceil(latency_ms))
    gb_seconds = memory_mb / 1024 * billed_ms / 1000
    return Cost(
        memory_mb=memory_mb,
        architecture=architecture,
        billed_ms=billed_ms,
        lambda_compute_usd=gb_seconds * GB_SECOND_USD[architecture] * 1_000_000,
        lambda_requests_usd=LAMBDA_REQUEST_USD_PER_MILLION,
        api_gateway_usd=API_GATEWAY_USD_PER_MILLION[api],
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
