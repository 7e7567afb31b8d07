#!/usr/bin/env python3
"""Lambda Managed Instances: what to set per bundle, and what a steady rate costs there
against per-request Lambda (on demand, with provisioned concurrency, with SnapStart).

    python -m benchmarks.managed_instances --bundle base-fp32=DIR --bundle base-int8=DIR \\
        [--measure [--seconds 20]] [--latency base-fp32=83,48] [--need large-fp32=1308,2308] \\
        [--memory-mb 8192 --gib-per-vcpu 4] [--vcpu-hour-usd 0.0408] [--rate 5 --rate 50]

For each bundle: its manifest's memory need (``memory.recommended_mb``, what one process
holds with the whole model resident; or ``--need`` without the bundle), and one query's latency at 1 and at 2 ONNX Runtime
threads (``--latency NAME=MS_AT_1,MS_AT_2``, e.g. docs/performance.md's, or ``--measure``:
measured here through `load_service`, single texts, and also as many 1-thread processes as
this machine has CPUs, all at once, which is how a Managed Instances environment runs them,
and what those processes hold in memory, alone and shared).
It prints what to set (`sizing.managed_instances_sizing`: PerExecutionEnvironmentMaxConcurrency
for ``--memory-mb`` at ``--gib-per-vcpu``), then one table row per bundle and rate.

The cost model (every price in `PRICES`, with its source; us-east-1, x86_64):

- Managed Instances: the EC2 price of the vCPUs the rate keeps busy at ``--utilization``
  (one 1-thread process per vCPU, the most queries per vCPU: a query keeps its CPU busy),
  never fewer than 3 execution environments of ``--memory-mb`` (Lambda starts three, one
  per Availability Zone), plus the management fee on the EC2 price and Lambda's request
  charge. ``--vcpu-hour-usd`` is the EC2 On-Demand price of one vCPU-hour of the instance
  type you allow (its hourly price divided by its vCPUs).
- Lambda on demand: the duration of each query at the cheaper of the bundle's recommended
  memory (at least 1,769 MB, one vCPU) and 3,538 MB (`cost.py`), plus the request charge.
- With provisioned concurrency: the environments the rate keeps busy (rate x latency /
  ``--utilization``), billed all the time, and the lower duration price for the queries.
- With SnapStart: on demand plus the snapshot cache for the memory size; restores (one per
  new environment, each charged per GB restored) are not counted: at a steady rate they are
  rare, their count is Lambda's.

The break-even rate is the steady rate above which Managed Instances cost less than Lambda
on demand. Frontend prices (API Gateway, function URL) are the same on both and left out.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from siglip_text.aws.sizing import LAMBDA_MB_PER_VCPU
from siglip_text.engine.bundle import MemoryNeed, load_manifest
from siglip_text.tools.managed_instances import managed_instances_sizing

from benchmarks.cost import GB_SECOND_USD, LAMBDA_REQUEST_USD_PER_MILLION, options


@dataclass(frozen=True)
class Price:
    usd: float
    unit: str
    source: str


#: Every price the model uses, with where it was read (docs/managed-instances.md lists them).
PRICES = {
    "lambda_gb_second": Price(
        GB_SECOND_USD["x86_64"],
        "per GB-second, x86_64",
        "AWS Lambda pricing, https://aws.amazon.com/lambda/pricing/ (docs/contract.md section 3)",
    ),
    "lambda_request": Price(
        LAMBDA_REQUEST_USD_PER_MILLION / 1e6,
        "per request (also on Managed Instances)",
        "AWS Lambda pricing, https://aws.amazon.com/lambda/pricing/",
    ),
    "provisioned_concurrency": Price(
        0.0000041667,
        "per GB-second configured, x86_64",
        "AWS Lambda pricing, https://aws.amazon.com/lambda/pricing/",
    ),
    "provisioned_duration": Price(
        0.0000097222,
        "per GB-second of duration on provisioned concurrency, x86_64",
        "AWS Lambda pricing, https://aws.amazon.com/lambda/pricing/",
    ),
    "snapstart_cache": Price(
        0.0000015046,
        "per GB-second of snapshot cached (Python)",
        "Lambda SnapStart Cost Impact, https://awsnegotiations.com/blog/lambda-snapstart-cost-impact/",
    ),
    "managed_instances_fee": Price(
        0.15,
        "of the EC2 On-Demand price",
        "aws/agent-toolkit-for-aws, skills/.../aws-lambda-managed-instances/SKILL.md "
        "(EC2 instance hours + 15% management fee + $0.20/1M requests)",
    ),
    "m7g_large_hour": Price(
        0.0816,
        "per hour, m7g.large (2 vCPUs, Graviton3), us-east-1 Linux",
        "Amazon EC2 On-Demand Pricing (2026), "
        "https://www.factualminds.com/blog/amazon-ec2-on-demand-pricing-instance-families-2026/",
    ),
}
#: Lambda starts three execution environments of a version, one per Availability Zone
#: (AWS Lambda Developer Guide, "Scaling Lambda Managed Instances").
MIN_ENVIRONMENTS = 3
DEFAULT_VCPU_HOUR = PRICES["m7g_large_hour"].usd / 2


@dataclass(frozen=True)
class Bundle:
    name: str
    need: MemoryNeed
    latency_ms: dict[int, float]  # threads -> one query's latency
    parallel_qps: float | None = None  # measured: all CPUs busy with 1-thread processes
    parallel_processes: int = 0


@dataclass(frozen=True)
class Row:
    bundle: str
    rate: float
    lmi: float
    on_demand: float
    provisioned: float
    snapstart: float
    break_even: float | None
    lambda_memory_mb: int


def qps_per_vcpu(bundle: Bundle) -> dict[int, float]:
    """Queries per second per vCPU: one process of t threads on t vCPUs."""
    return {t: 1000.0 / ms / t for t, ms in sorted(bundle.latency_ms.items())}


def lambda_choice(bundle: Bundle) -> tuple[int, float]:
    """The per-request MemorySize and its latency (the cheaper of the two, as sizes.py)."""
    recommended = max(LAMBDA_MB_PER_VCPU, bundle.need.recommended_mb)
    choices = options({"x": bundle.latency_ms}, sorted({recommended, 2 * LAMBDA_MB_PER_VCPU}))
    best = min(choices, key=lambda o: (o.cost("x86_64", "function-url").total_usd, o.latency_ms))
    return best.memory_mb, best.latency_ms


def costs(
    bundle: Bundle,
    rate: float,
    *,
    memory_mb: int,
    gib_per_vcpu: float,
    vcpu_hour: float,
    utilization: float,
) -> Row:
    """Dollars per million queries at a steady ``rate`` (queries per second)."""
    sizing = managed_instances_sizing(
        bundle.need, memory_mb=memory_mb, memory_gib_per_vcpu=gib_per_vcpu
    )
    per_vcpu = qps_per_vcpu(bundle)
    # one 1-thread process per vCPU (sizing.py): the 1-thread rate of each vCPU
    serving_qps = (
        bundle.parallel_qps / bundle.parallel_processes if bundle.parallel_qps else per_vcpu[1]
    )
    fee = 1 + PRICES["managed_instances_fee"].usd
    request = PRICES["lambda_request"].usd
    min_vcpus = MIN_ENVIRONMENTS * sizing.vcpus
    busy_vcpus = rate / (serving_qps * utilization)
    queries_per_hour = rate * 3600
    lmi_hour = max(min_vcpus, busy_vcpus) * vcpu_hour * fee
    lmi = (lmi_hour / queries_per_hour + request) * 1e6

    lambda_mb, latency_ms = lambda_choice(bundle)
    gb = lambda_mb / 1024
    billed_s = math.ceil(latency_ms) / 1000
    on_demand_query = gb * billed_s * PRICES["lambda_gb_second"].usd
    on_demand = (on_demand_query + request) * 1e6
    environments = math.ceil(rate * latency_ms / 1000 / utilization)
    pc_hour = environments * gb * 3600 * PRICES["provisioned_concurrency"].usd
    provisioned = (
        pc_hour / queries_per_hour + gb * billed_s * PRICES["provisioned_duration"].usd + request
    ) * 1e6
    cache_hour = gb * 3600 * PRICES["snapstart_cache"].usd
    snapstart = on_demand + cache_hour / queries_per_hour * 1e6

    # below saturation Managed Instances cost the minimum fleet per hour; Lambda's cost grows
    # with the rate: they cross at min fleet / duration cost, if the fleet is not full by then
    compute_per_query = vcpu_hour * fee / (serving_qps * utilization * 3600)
    break_even: float | None = None
    if on_demand_query > compute_per_query:
        crossing = min_vcpus * vcpu_hour * fee / 3600 / on_demand_query
        break_even = crossing
    return Row(
        bundle=bundle.name,
        rate=rate,
        lmi=lmi,
        on_demand=on_demand,
        provisioned=provisioned,
        snapstart=snapstart,
        break_even=break_even,
        lambda_memory_mb=lambda_mb,
    )


# --- measuring, here -------------------------------------------------------------------------


def _texts() -> list[str]:
    return [f"a photo of {n} dogs running on the beach at dusk" for n in range(64)]


def _worker(
    bundle: str, threads: int, seconds: float, start: Any, out: Any
) -> None:  # pragma: no cover - runs in a child process
    os.environ["SIGLIP_ORT_INTRA_OP_THREADS"] = str(threads)
    from siglip_text.settings import load_service, load_settings

    service = load_service(load_settings(model_dir=Path(bundle), ort_intra_op_threads=threads))
    texts = _texts()
    for text in texts[:5]:
        service.embed_texts([text])
    start.wait()
    done, latencies, began = 0, [], time.perf_counter()
    while time.perf_counter() - began < seconds:
        t0 = time.perf_counter()
        service.embed_texts([texts[done % len(texts)]])
        latencies.append((time.perf_counter() - t0) * 1000)
        done += 1
    out.put((done, time.perf_counter() - began, sorted(latencies)[len(latencies) // 2]))


def measure(bundle: Path, *, threads: int, processes: int, seconds: float) -> tuple[float, float]:
    """(queries per second of all processes together, median latency in ms) with
    ``processes`` processes of ``threads`` ONNX Runtime threads each, running at once."""
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(processes)
    out = ctx.Queue()
    workers = [
        ctx.Process(target=_worker, args=(str(bundle), threads, seconds, start, out))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    results = [out.get() for _ in workers]
    for worker in workers:
        worker.join()
    qps = sum(done / elapsed for done, elapsed, _ in results)
    median = sorted(m for _, _, m in results)[len(results) // 2]
    return qps, median


def _rollup(pid: int) -> dict[str, int]:
    """/proc/PID/smaps_rollup in MiB: Rss, Pss, Shared_Clean, Private_Dirty, ..."""
    out = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, value = line.partition(":")
        out[key] = int(value.split()[0]) // 1024
    return out


def _holder(bundle: str, ready: Any, done: Any) -> None:  # pragma: no cover - a child
    from siglip_text.settings import load_service, load_settings

    service = load_service(load_settings(model_dir=Path(bundle), ort_intra_op_threads=1))
    for text in _texts()[:5]:
        service.embed_texts([text])
    ready.set()
    done.wait()


def measure_memory(bundle: Path, processes: int) -> list[dict[str, int]]:
    """Each of ``processes`` serving processes' memory (smaps_rollup), side by side: what
    the processes of one environment share (libraries) and what each holds alone."""
    ctx = multiprocessing.get_context("spawn")
    done = ctx.Event()
    readies = [ctx.Event() for _ in range(processes)]
    holders = [ctx.Process(target=_holder, args=(str(bundle), r, done)) for r in readies]
    for holder in holders:
        holder.start()
    for ready in readies:
        ready.wait()
    rows = [_rollup(holder.pid or 0) for holder in holders]
    done.set()
    for holder in holders:
        holder.join()
    return rows


# --- output ----------------------------------------------------------------------------------


def usd(value: float) -> str:
    return f"{value:,.2f}" if value >= 1 else f"{value:.3f}"


def smallest_gib_per_vcpu(need: MemoryNeed) -> int:
    """The least MemoryGiBPerVCpu (2 to 8) at which one process per vCPU keeps its whole
    model resident; 8 when even that does not (then fewer processes than vCPUs)."""
    return min(8, max(2, math.ceil(need.recommended_mb / 1024)))


def sizing_table(bundles: list[Bundle]) -> list[str]:
    lines = [
        "| bundle | memory per process (MB) | processes per vCPU | MemoryGiBPerVCpu at least "
        "| memory per 2-vCPU environment (MB) | q/s per vCPU: 1 process, 1 / 2 threads "
        "| q/s per vCPU: 1-thread processes on every vCPU |",
        "|---|---|---|---|---|---|---|",
    ]
    for bundle in bundles:
        ratio = smallest_gib_per_vcpu(bundle.need)
        sizing = managed_instances_sizing(
            bundle.need, memory_mb=2 * ratio * 1024, memory_gib_per_vcpu=ratio
        )
        per_vcpu = qps_per_vcpu(bundle)
        rates = " / ".join(f"{per_vcpu[t]:.1f}" for t in sorted(per_vcpu))
        parallel = (
            f"{bundle.parallel_qps / bundle.parallel_processes:.1f} ({bundle.parallel_processes})"
            if bundle.parallel_qps
            else "not measured"
        )
        lines.append(
            f"| {bundle.name} | {bundle.need.recommended_mb:,} "
            f"| {sizing.max_concurrency / sizing.vcpus:g} | {ratio} "
            f"| {sizing.max_concurrency * sizing.need_mb:,} of {2 * ratio * 1024:,} "
            f"| {rates} | {parallel} |"
        )
    return lines


def cost_table(rows: list[Row]) -> list[str]:
    lines = [
        "| bundle | rate (q/s) | Managed Instances $/M | Lambda on demand $/M (MemorySize) "
        "| with provisioned concurrency $/M | with SnapStart $/M | break-even (q/s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        even = f"{row.break_even:.1f}" if row.break_even is not None else "never"
        lines.append(
            f"| {row.bundle} | {row.rate:g} | {usd(row.lmi)} "
            f"| {usd(row.on_demand)} ({row.lambda_memory_mb:,}) "
            f"| {usd(row.provisioned)} | {usd(row.snapstart)} | {even} |"
        )
    return lines


def _pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=_pair, action="append", default=[], metavar="NAME=DIR")
    parser.add_argument(
        "--need",
        type=_pair,
        action="append",
        default=[],
        metavar="NAME=MIN_MB,REC_MB",
        help="a bundle's memory need without the bundle (its manifest's memory, docs/sizes.md)",
    )
    parser.add_argument(
        "--latency", type=_pair, action="append", default=[], metavar="NAME=MS1,MS2"
    )
    parser.add_argument("--measure", action="store_true", help="measure the latencies here")
    parser.add_argument("--seconds", type=float, default=20.0, help="per measurement")
    parser.add_argument("--memory-mb", type=int, default=8192, help="ManagedInstancesMemorySize")
    parser.add_argument("--gib-per-vcpu", type=float, default=4.0, help="MemoryGiBPerVCpu")
    parser.add_argument(
        "--vcpu-hour-usd",
        type=float,
        default=DEFAULT_VCPU_HOUR,
        help="EC2 On-Demand price of one vCPU-hour (default: m7g.large's, halved)",
    )
    parser.add_argument("--utilization", type=float, default=0.7, help="CPU kept busy")
    parser.add_argument("--rate", type=float, action="append", help="steady q/s (5, 50)")
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)
    latencies = {name: value for name, value in args.latency}
    rates = args.rate or [5.0, 50.0]

    if not args.bundle and not args.need:
        parser.error("give --bundle NAME=DIR or --need NAME=MIN_MB,REC_MB")
    bundles: list[Bundle] = []
    for name, value in args.need:
        minimum, recommended = (int(v) for v in value.split(","))
        if name not in latencies:
            parser.error(f"{name}: give --latency {name}=MS1,MS2")
        one, two = (float(v) for v in latencies[name].split(","))
        need = MemoryNeed(minimum_mb=minimum, recommended_mb=recommended, basis="given")
        bundles.append(Bundle(name, need, {1: one, 2: two}))
    for name, directory in args.bundle:
        manifest = load_manifest(Path(directory) / "manifest.json")
        if manifest.memory is None:
            parser.error(f"{directory}: the manifest records no memory need (re-export it)")
        parallel_qps, processes = None, 0
        if name in latencies:
            one, two = (float(v) for v in latencies[name].split(","))
            by_threads = {1: one, 2: two}
        elif args.measure:
            cpus = len(os.sched_getaffinity(0))
            by_threads = {}
            for threads in (1, 2):
                _, median = measure(
                    Path(directory), threads=threads, processes=1, seconds=args.seconds
                )
                by_threads[threads] = median
            processes = cpus
            parallel_qps, _ = measure(
                Path(directory), threads=1, processes=processes, seconds=args.seconds
            )
            memory = measure_memory(Path(directory), processes)
            print(
                f"[measured] {name}: {processes} serving processes, each RSS "
                f"{memory[0]['Rss']} MiB of which {memory[0]['Shared_Clean']} shared and "
                f"{memory[0]['Private_Dirty']} private; together RSS "
                f"{sum(m['Rss'] for m in memory)}, PSS {sum(m['Pss'] for m in memory)} MiB",
                flush=True,
            )
            print(
                f"[measured] {name}: one query {by_threads[1]:.1f} ms at 1 thread, "
                f"{by_threads[2]:.1f} ms at 2; {processes} 1-thread processes at once: "
                f"{parallel_qps:.1f} q/s ({parallel_qps / processes:.1f} per vCPU)",
                flush=True,
            )
        else:
            parser.error(f"{name}: give --latency {name}=MS1,MS2 or --measure")
        bundles.append(Bundle(name, manifest.memory, by_threads, parallel_qps, processes))

    print("## Sizing per bundle\n")
    print("\n".join(sizing_table(bundles)))
    print(
        f"\n## What to set (ManagedInstancesMemorySize={args.memory_mb}, "
        f"MemoryGiBPerVCpu={args.gib_per_vcpu:g})\n"
    )
    for bundle in bundles:
        sizing = managed_instances_sizing(
            bundle.need, memory_mb=args.memory_mb, memory_gib_per_vcpu=args.gib_per_vcpu
        )
        print(f"- {bundle.name}: {sizing.advice()}")
    rows = [
        costs(
            bundle,
            rate,
            memory_mb=args.memory_mb,
            gib_per_vcpu=args.gib_per_vcpu,
            vcpu_hour=args.vcpu_hour_usd,
            utilization=args.utilization,
        )
        for bundle in bundles
        for rate in rates
    ]
    print(
        f"\n## Cost per million queries (vCPU-hour ${args.vcpu_hour_usd:.4f}, "
        f"{args.utilization:.0%} CPU utilization)\n"
    )
    print("\n".join(cost_table(rows)))
    print("\nPrices:")
    for key, price in PRICES.items():
        print(f"- {key}: {price.usd:g} {price.unit} ({price.source})")
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps([row.__dict__ for row in rows], indent=2, default=str)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
