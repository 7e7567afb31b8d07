"""The tables `run.py` prints: latency, init, the matmul floor, fidelity, the spread over
repeats, and the cost model per frontend (prices in `cost.py`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.workers import PAIRED_ROUNDS


def tokenizer_note(path: Path, bundles: dict[str, str]) -> str:
    """Whether each bundle's tokenizer has the vocabulary of ``path`` (the real one)."""
    vocab = json.loads(path.read_text(encoding="utf-8"))["model"]["vocab"]
    lines = [f"[bench] tokenizer {path}: {len(vocab):,} entries"]
    for name, bundle in bundles.items():
        data = json.loads((Path(bundle) / "tokenizer.json").read_text(encoding="utf-8"))
        entries = data["model"]["vocab"]
        # Export may drop entries no text can produce (tokenizer_merges.py); every one kept
        # must have its id of the real vocabulary.
        same = all(vocab.get(token) == i for token, i in entries.items())
        if not same:
            verdict = "A DIFFERENT vocabulary"
        elif len(entries) == len(vocab):
            verdict = "same vocabulary"
        else:
            verdict = f"same ids, {len(entries):,} of its entries"
        merges = len(data["model"].get("merges") or [])
        lines.append(
            f"[bench]   {name}: {verdict}, "
            f"{merges:,} merges, {(Path(bundle) / 'tokenizer.json').stat().st_size / 1e6:.1f} MB"
        )
    return "\n".join(lines)


def spread(runs: list[dict[str, Any]], bundles: dict[str, str], args: argparse.Namespace) -> str:
    """The ratios of every repeat side by side, and their range."""
    lines = ["", f"## Spread over {len(runs)} repeats (each ratio within one repeat)", ""]
    lines.append(
        "| ratio | " + " | ".join(f"repeat {i + 1}" for i in range(len(runs))) + " | range |"
    )
    lines.append("|---|" + "---|" * (len(runs) + 1))
    rows: list[tuple[str, Any]] = []
    for name in bundles:
        if 1 not in args.batches:
            break

        def to_floor(f: dict[str, Any], n: str = name) -> float | None:
            if f[n].get("paired_floor"):
                return float(f[n]["paired_floor"]["ratio_median"])
            precision = f[n].get("precision") or "fp32"
            limit = f.get("floor", {}).get(f"{precision}_floor_ms")
            return f[n]["latency"]["1"]["handler"]["median_ms"] / limit if limit else None

        rows.append((f"{name}: handler batch 1 / floor (paired when measured)", to_floor))
    for name in bundles:
        old = f"today-{name}"
        if old not in bundles:
            continue
        for batch in args.batches:
            rows.append(
                (
                    f"{name} / {old}: handler batch {batch}",
                    lambda f, n=name, o=old, b=batch: (
                        f[n]["latency"][str(b)]["handler"]["median_ms"]
                        / f[o]["latency"][str(b)]["handler"]["median_ms"]
                    ),
                )
            )
        rows.append(
            (
                f"{name} / {old}: init",
                lambda f, n=name, o=old: f[n]["init"]["total_s"] / f[o]["init"]["total_s"],
            )
        )
    for name in bundles:
        if "torch" in runs[0]:
            rows.append(
                (
                    f"{name}: init / PyTorch load",
                    lambda f, n=name: f[n]["init"]["total_s"] / f["torch"]["init"]["total_s"],
                )
            )
            if 1 in args.batches:
                rows.append(
                    (
                        f"{name}: handler batch 1 / PyTorch",
                        lambda f, n=name: (
                            f[n]["latency"]["1"]["handler"]["median_ms"]
                            / f["torch"]["latency"]["1"]["torch"]["median_ms"]
                        ),
                    )
                )
    for label, value in rows:
        values = [value(f) for f in runs]
        if any(v is None for v in values):
            continue
        cells = " | ".join(f"{v:.3f}" for v in values)
        lines.append(f"| {label} | {cells} | {min(values):.3f}-{max(values):.3f} |")
    lines.append("")
    lines.append(
        "init (s) per repeat: "
        + "; ".join(
            f"{name} " + ", ".join(f"{f[name]['init']['total_s']:.2f}" for f in runs)
            for name in bundles
        )
    )
    return "\n".join(lines)


def today_versus_new(
    figures: dict[str, Any], bundles: dict[str, str], args: argparse.Namespace
) -> list[str]:
    """Each bundle ``NAME`` beside ``today-NAME`` (when both were measured): new / today."""
    pairs = [(name, f"today-{name}") for name in bundles if f"today-{name}" in bundles]
    if not pairs:
        return []
    lines = [
        "",
        "## Today vs new (same run; new / today below 1 is faster)",
        "",
        "| figure | " + " | ".join(f"{old} | {new} | new / today" for new, old in pairs) + " |",
        "|---|" + "---|---|---|" * len(pairs),
    ]
    rows: list[tuple[str, Any]] = []
    for batch in args.batches:
        rows.append(
            (
                f"handler, batch {batch}, per query (ms)",
                lambda f, b=batch: f["latency"][str(b)]["handler"]["median_ms"] / b,
            )
        )
    rows += [
        ("init total (s)", lambda f: f["init"]["total_s"]),
        ("init: imports and app (s)", lambda f: f["init"]["imports_s"]),
        ("init: tokenizer (s)", lambda f: f["init"]["tokenizer_s"]),
        ("init: session, own thread (s)", lambda f: f["init"]["session_s"]),
        ("peak RSS (MB)", lambda f: f["init"]["peak_rss_mb"]),
    ]
    for label, value in rows:
        cells = []
        for new, old in pairs:
            a, b = value(figures[old]), value(figures[new])
            cells.append(f"{a:.3f} | {b:.3f} | {b / a:.3f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def usd(value: float) -> str:
    return f"${value:.2f}"


def cost_report(
    latencies: dict[str, dict[int, float]], args: argparse.Namespace, *, source: str
) -> list[str]:
    """The cost model per frontend: every option, then the cheapest one per latency budget.

    ``latencies``: precision -> {threads: single-query handler latency in ms}.
    """
    from benchmarks.cost import (
        ARCHITECTURES,
        FRONTEND_LABEL,
        FRONTEND_USD_PER_MILLION,
        cheapest_within,
        options,
    )

    sizes = [int(m) for m in str(args.memory_sizes).split(",")]
    budgets = [float(b) for b in str(args.latency_budgets).split(",")]
    frontends = list(FRONTEND_USD_PER_MILLION)
    threads = sorted({t for by_threads in latencies.values() for t in by_threads})
    every = options(latencies, sizes)

    def prices(option: Any) -> list[str]:
        return [
            " / ".join(usd(option.cost(arch, frontend).total_usd) for arch in ARCHITECTURES)
            for frontend in frontends
        ]

    lines = [
        "",
        "## Cost per million single-text queries, per frontend",
        "",
        f"Latency at each memory size from {source} at {', '.join(map(str, threads))} "
        "thread(s) on x86_64: the 1-thread latency stretched by the CPU share below one vCPU "
        "(1,769 MB), the best thread count at or below the share above it (larger sizes "
        "assumed no faster). arm64 is priced at the same latency (not measured). Each total "
        "is Lambda (GB-seconds, billed per ms, + $0.20) plus the frontend: "
        + ", ".join(f"{FRONTEND_LABEL[f]} {usd(FRONTEND_USD_PER_MILLION[f])}" for f in frontends)
        + ".",
        "",
        "| precision | memory | est. ms | "
        + " | ".join(f"{FRONTEND_LABEL[f]} x86_64 / arm64" for f in frontends)
        + " |",
        "|---|---|---|" + "---|" * len(frontends),
    ]
    for option in every:
        lines.append(
            f"| {option.precision} | {option.memory_mb:,} MB | {option.latency_ms:.0f} | "
            + " | ".join(prices(option))
            + " |"
        )
    rest, url = "rest-api", "function-url"
    lines += [
        "",
        "## Cheapest choice for a latency budget",
        "",
        "Per precision, the memory size with the lowest cost whose estimated latency meets the "
        "budget (x86_64 latencies; the same choice on arm64, whose GB-seconds cost 20% "
        "less), and what it costs behind a REST API and behind a function URL.",
        "",
        f"| budget | precision | memory | est. ms | {FRONTEND_LABEL[rest]} x86_64 / arm64 | "
        f"{FRONTEND_LABEL[url]} x86_64 / arm64 | {FRONTEND_LABEL[url]} / {FRONTEND_LABEL[rest]} |",
        "|---|---|---|---|---|---|---|",
    ]
    for budget in budgets:
        for precision in latencies:
            mine = [o for o in every if o.precision == precision]
            best = cheapest_within(mine, budget, architecture="x86_64", frontend=rest)
            if best is None:
                lines.append(f"| {budget:.0f} ms | {precision} | none fits | | | | |")
                continue
            ratio = best.cost("x86_64", url).total_usd / best.cost("x86_64", rest).total_usd
            cells = [
                " / ".join(usd(best.cost(arch, frontend).total_usd) for arch in ARCHITECTURES)
                for frontend in (rest, url)
            ]
            lines.append(
                f"| {budget:.0f} ms | {precision} | {best.memory_mb:,} MB | "
                f"{best.latency_ms:.0f} | {cells[0]} | {cells[1]} | {ratio:.2f} |"
            )
    return lines


def report(figures: dict[str, Any], bundles: dict[str, str], args: argparse.Namespace) -> str:

    lines = [
        f"## Latency (ms), {args.threads} thread(s), ORT spinning {args.allow_spinning}, "
        f"{args.runs} runs each, median / p99",
        "",
    ]
    torch = figures.get("torch")
    lines.append(
        "| bundle | batch | session.run | handler | handler per query | handler - run | PyTorch | "
        "handler / PyTorch |"
    )
    lines.append("|---|---|---|---|---|---|---|---|")
    for name in bundles:
        for batch in args.batches:
            leg = figures[name]["latency"][str(batch)]
            raw, handler = leg["raw"], leg["handler"]
            row = [
                name,
                str(batch),
                f"{raw['median_ms']:.2f} / {raw['p99_ms']:.2f}",
                f"{handler['median_ms']:.2f} / {handler['p99_ms']:.2f}",
                f"{handler['median_ms'] / batch:.2f}",
                f"{handler['median_ms'] - raw['median_ms']:.2f}",
            ]
            if torch:
                pt = torch["latency"][str(batch)]["torch"]
                row += [
                    f"{pt['median_ms']:.2f} / {pt['p99_ms']:.2f}",
                    f"{handler['median_ms'] / pt['median_ms']:.3f}",
                ]
            else:
                row += ["-", "-"]
            lines.append("| " + " | ".join(row) + " |")
    lines += ["", "## Init (s) and memory", ""]
    lines.append(
        "| leg | imports and app | tokenizer | session (own thread) | waited for session | probe | total init | vs PyTorch load | peak RSS MB | model file MB | RSS / file |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in bundles:
        init = figures[name]["init"]
        ratio = f"{init['total_s'] / torch['init']['total_s']:.3f}" if torch else "-"
        lines.append(
            f"| {name} | {init['imports_s']:.3f} | {init['tokenizer_s']:.3f} | {init['session_s']:.3f} | "
            f"{init.get('session_wait_s', 0.0):.3f} | {init['probe_s']:.3f} | {init['total_s']:.3f} | {ratio} | {init['peak_rss_mb']:.0f} | "
            f"{init['model_file_mb']:.1f} | {init['peak_rss_mb'] / max(init['model_file_mb'], 1e-9):.2f} |"
        )
    if torch:
        init = torch["init"]
        lines.append(
            f"| PyTorch | {init['imports_s']:.3f} | - | {init['load_s']:.3f} (from_pretrained) | - | - | "
            f"{init['total_s']:.3f} | 1 | {init['peak_rss_mb']:.0f} | - | - |"
        )
    floor = figures.get("floor", {})
    if "error" in floor:
        lines += ["", "## Matmul floor", "", f"Unavailable: {floor['error']}", ""]
    if "shapes" in floor:
        lines += [
            "",
            f"## Matmul floor (ORT's own MatMul at the query's shapes, {args.threads} thread(s))",
            "",
            "| product | fp32 ms | fp32 GFLOP/s | int8 ms | int8 GOP/s |",
            "|---|---|---|---|---|",
        ]
        for shape, rate in floor["shapes"].items():
            lines.append(
                f"| {shape} | {rate['fp32_ms']:.3f} | {rate['fp32_gflops']:.0f} | "
                f"{rate['int8_ms']:.3f} | {rate['int8_gflops']:.0f} |"
            )
        lines += [
            "",
            f"{floor['model_gflop_per_query']:.2f} GFLOP of weight products per query -> floor "
            f"{floor['fp32_floor_ms']:.2f} ms fp32, {floor['int8_floor_ms']:.2f} ms int8",
            "",
        ]
        if "mlp_chain" in floor:
            chain = floor["mlp_chain"]
            lines += [
                f"The floor repeats one product with its weights in cache. The {chain['layers']} "
                "layers' MLP products chained, each with its own weights as in the tower, take "
                f"{chain['fp32_ratio']:.2f}x that fp32 and {chain['int8_ratio']:.2f}x int8.",
                "",
            ]
        lines += [
            "| bundle | precision | session.run batch 1 | handler batch 1 | floor | run / floor | "
            "handler / floor | handler / floor, paired: median (range) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name in bundles:
            if "1" not in figures[name]["latency"]:
                continue
            precision = figures[name].get("precision") or "fp32"
            limit = floor[f"{precision}_floor_ms"] if precision in ("fp32", "int8") else None
            leg = figures[name]["latency"]["1"]
            raw, handler = leg["raw"]["median_ms"], leg["handler"]["median_ms"]
            ratios = f"{raw / limit:.2f} | {handler / limit:.2f}" if limit else "- | -"
            pair = figures[name].get("paired_floor")
            paired = (
                f"{pair['ratio_median']:.2f} ({pair['ratio_min']:.2f}-{pair['ratio_max']:.2f}; "
                f"floor {pair['floor_ms_median']:.2f} ms)"
                if pair
                else "-"
            )
            lines.append(
                f"| {name} | {precision} | {raw:.2f} | {handler:.2f} | "
                f"{limit or 0:.2f} | {ratios} | {paired} |"
            )
        lines += [
            "",
            f"Paired: in each leg's own process, {PAIRED_ROUNDS} rounds of the query through the "
            "handler then every product of the floor, each the median of --runs; the median of "
            "the rounds' ratios and their range.",
        ]
    lines += today_versus_new(figures, bundles, args)
    lines += [
        "",
        "## Fidelity (min cosine to " + ("PyTorch" if torch else next(iter(bundles))) + ")",
        "",
    ]
    lines += [f"- {name}: {value:.6f}" for name, value in figures["fidelity"].items()]
    latencies = {}
    for name in bundles:
        if "1" not in figures[name]["latency"]:
            continue
        by_threads = {args.threads: figures[name]["latency"]["1"]["handler"]["median_ms"]}
        if args.threads > 1:
            if "one_thread_ms" not in figures[name]:
                continue  # --no-one-thread
            by_threads[1] = figures[name]["one_thread_ms"]
        latencies[name] = by_threads
    if latencies:
        lines += cost_report(latencies, args, source="the handler medians of this run")
    return "\n".join(lines)
