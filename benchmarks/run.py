#!/usr/bin/env python3
"""Side-by-side benchmark: raw ORT session.run, the Lambda handler end to end, and
transformers on PyTorch, on the same weights, in one run. Prints markdown tables.

    # the tiny demo model (what CI checks runs):
    python benchmarks/run.py --runs 5
    # the full-size base tower made by benchmarks/make_full_model.py:
    python benchmarks/run.py --bundle fp32=~/.cache/siglip-text/bench/base/fp32 \\
        --bundle int8=~/.cache/siglip-text/bench/base/int8 \\
        --checkpoint ~/.cache/siglip-text/bench/base/checkpoint --runs 30

Each leg runs in its own subprocess (clean import and init timings, its own peak RSS) and
the legs run one after another, never at once. Ratios are computed within this one run;
absolute times on a shared 2-core machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TEXTS = [
    "a photo of a cat sitting on a wooden table",
    "a red block and a robot arm",
    "two people riding bicycles on a city street at night",
    "a dog running on the beach at sunset",
    "close view of a kitchen with metal pots",
    "snowy mountain road with a small car",
    "a bird on a tree branch in the park",
    "an old train crossing a river bridge",
]


def texts_for(batch: int, offset: int = 0) -> list[str]:
    return [f"{TEXTS[(i + offset) % len(TEXTS)]} {i + offset}" for i in range(batch)]


def stats(samples_s: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples_s)
    rank = (len(ms) - 1) * 0.99
    low = int(rank)
    high = min(low + 1, len(ms) - 1)
    return {
        "median_ms": statistics.median(ms),
        "p99_ms": ms[low] + (ms[high] - ms[low]) * (rank - low),
        "runs": len(ms),
    }


def rss_mb() -> dict[str, float]:
    """Peak (VmHWM) and current (VmRSS) resident memory of this process.

    Not ru_maxrss: Linux carries it over exec from the parent's memory.
    """
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(("VmHWM:", "VmRSS:")):
                fields[line.split(":")[0]] = int(line.split()[1]) / 1024
    return {"peak_rss_mb": fields["VmHWM"], "rss_mb": fields["VmRSS"]}


def timed(fn: Any, runs: int, warmup: int = 3) -> dict[str, float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - began)
    return stats(samples)


# --------------------------------------------------------------------------- workers


def worker_ort(args: argparse.Namespace) -> dict[str, Any]:
    """Init through the real Lambda entry point, then raw session.run vs the handler."""
    os.environ["SIGLIP_MODEL_DIR"] = args.bundle_dir
    os.environ["SIGLIP_ORT_INTRA_OP_THREADS"] = str(args.threads)
    os.environ["SIGLIP_ORT_ALLOW_SPINNING"] = args.allow_spinning
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "SiglipTextBench")
    # The init as Lambda runs it: the entry point imported first, nothing imported before it
    # (it starts the ONNX Runtime session before it imports the web stack).
    began = time.perf_counter()
    from siglip_text import lambda_function

    init_s = time.perf_counter() - began
    import numpy as np

    memory = rss_mb()
    service = lambda_function.app.state.service
    bundle = Path(args.bundle_dir)
    files = sum(p.stat().st_size for p in bundle.iterdir() if p.name.startswith("text_model"))

    from tests.support.aws_lambda import LambdaContext

    context = LambdaContext()
    event = json.loads((ROOT / "events" / "rest-embeddings-batch.json").read_text())
    results: dict[str, Any] = {"latency": {}, "precision": service.manifest.precision}
    devnull = open(os.devnull, "w")  # noqa: SIM115 - EMF metrics lines go to stdout
    for batch in args.batches:
        texts = texts_for(batch)
        ids = service.tokenizer.encode_texts(texts).ids
        feeds = {"input_ids": ids}
        raw = timed(lambda f=feeds: service.encoder.session.run(None, f), args.runs)
        body = json.dumps({"input": texts, "encoding_format": "base64"})
        event["body"] = body
        real_stdout = sys.stdout
        sys.stdout = devnull
        try:
            handler = timed(lambda: lambda_function.handler(event, context), args.runs)
            check = lambda_function.handler(event, context)
        finally:
            sys.stdout = real_stdout
        assert check["statusCode"] == 200, check
        results["latency"][str(batch)] = {"raw": raw, "handler": handler}
        if batch == 1 and args.floor_dir:
            sys.stdout = devnull
            try:
                results["paired_floor"] = paired_floor(
                    args,
                    results["precision"] or "fp32",
                    lambda: lambda_function.handler(event, context),
                )
            finally:
                sys.stdout = real_stdout
    vectors = service.embed_texts(texts_for(max(args.batches)))
    np.save(args.vectors_out, vectors.vectors)
    timings = service.init_timings.as_dict()
    results["init"] = {
        # the rest of the init: imports (the libraries, FastAPI, Powertools) and the app
        "imports_s": init_s
        - sum(timings[k] for k in ("manifest_s", "tokenizer_s", "session_wait_s", "probe_s")),
        "total_s": init_s,
        **timings,
        **memory,
        "model_file_mb": files / 2**20,
    }
    return results


def floor_session(args: argparse.Namespace, path: Path) -> Any:
    """An ORT session of a floor product, with the legs' threads and spinning."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry(
        "session.intra_op.allow_spinning", "1" if args.allow_spinning == "true" else "0"
    )
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def product_file(floor_dir: Path, shape: tuple[int, int, int], precision: str) -> Path:
    """Where the floor worker writes the model of one product ([m, k] x [k, n])."""
    m, k, n = shape
    return floor_dir / (f"{m}x{k}x{n}" + (".int8" if precision == "int8" else "") + ".onnx")


#: Rounds of the paired floor: each times the query, then each product, `--runs` times.
PAIRED_ROUNDS = 5


def paired_floor(args: argparse.Namespace, precision: str, query: Any) -> dict[str, Any] | None:
    """The query over its floor, measured in this process in alternating rounds.

    The floor worker runs minutes before or after a leg, and the floor of a shared machine
    moves that much in minutes (int8 15 to 20 ms within one hour here). Here each round
    times the query (median of ``--runs``), pauses 50 ms, then times every product of the
    floor (the floor worker's own models, each in a fresh session, median of ``--runs``),
    and takes their ratio; the figure is the median ratio of `PAIRED_ROUNDS` rounds, with
    their range.
    """
    import numpy as np

    if precision not in ("fp32", "int8"):
        return None
    floor_dir = Path(args.floor_dir)
    products = [tuple(p) for p in json.loads((floor_dir / "products.json").read_text())]

    def product_ms(m: int, k: int, n: int) -> float:
        # A session of its own, gone once timed: a live session's threads spin after each
        # run and slow the next session's (measured: 20 to 24 ms for an int8 floor of 15).
        session = floor_session(args, product_file(floor_dir, (m, k, n), precision))
        x = np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)
        return timed(lambda: session.run(None, {"x": x}), args.runs)["median_ms"]

    rounds = []
    for _ in range(PAIRED_ROUNDS):
        query_ms = timed(query, args.runs)["median_ms"]
        time.sleep(0.05)  # the model session's threads stop spinning
        floor_ms = sum(count * product_ms(m, k, n) for m, k, n, count in products)
        rounds.append({"query_ms": query_ms, "floor_ms": floor_ms, "ratio": query_ms / floor_ms})
    ratios = sorted(r["ratio"] for r in rounds)
    return {
        "rounds": rounds,
        "ratio_median": statistics.median(ratios),
        "ratio_min": ratios[0],
        "ratio_max": ratios[-1],
        "floor_ms_median": statistics.median(r["floor_ms"] for r in rounds),
    }


def worker_torch(args: argparse.Namespace) -> dict[str, Any]:
    """transformers on PyTorch: load time and get_text_features latency, same threads."""
    began = time.perf_counter()
    import numpy as np
    import torch
    import transformers

    imports_s = time.perf_counter() - began
    torch.set_num_threads(args.threads)
    loaded = time.perf_counter()
    model = transformers.AutoModel.from_pretrained(args.checkpoint).eval()
    load_s = time.perf_counter() - loaded
    total_s = time.perf_counter() - began
    memory = rss_mb()
    from siglip_text.tokenization import SiglipTokenizer

    tokenizer = SiglipTokenizer.from_file(Path(args.bundle_dir) / "tokenizer.json", max_length=64)
    tower = getattr(model, "text_model", model)

    def features(ids: Any) -> Any:
        with torch.inference_mode():
            return tower(input_ids=ids).pooler_output

    results: dict[str, Any] = {"latency": {}}
    for batch in args.batches:
        ids = torch.from_numpy(tokenizer.encode_texts(texts_for(batch)).ids)
        results["latency"][str(batch)] = {"torch": timed(lambda i=ids: features(i), args.runs)}
    ids = torch.from_numpy(tokenizer.encode_texts(texts_for(max(args.batches))).ids)
    pooled = features(ids).numpy()
    np.save(args.vectors_out, pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
    results["init"] = {"imports_s": imports_s, "load_s": load_s, "total_s": total_s, **memory}
    return results


def worker_floor(args: argparse.Namespace) -> dict[str, Any]:
    """The machine's matmul rate through ORT (MLAS) at the query's shapes, same threads.

    For each product of a query ([64, 768] x [768, 3072] and the others): ORT's own fp32
    MatMul, and the same MatMul through ``quantize_dynamic`` (int8 weights per column, the
    activation quantized per call: DynamicQuantizeMatMul after ORT's optimization), each
    the best of 5 medians. The floor of a query is the sum of its products' times.
    """
    import tempfile

    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    products = tower_products(args)
    out: dict[str, Any] = {"products": [list(p) for p in products], "shapes": {}}
    # The product models stay in --floor-dir: the ORT legs measure them again, interleaved
    # with their own queries (`paired_floor`).
    scratch = Path(args.floor_dir or tempfile.mkdtemp(prefix="siglip-floor-"))
    scratch.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)

    def save_chain(name: str, weights: list[tuple[int, int]], rows: int) -> tuple[Path, Path]:
        """x -> MatMul(w0) -> MatMul(w1) ... each weight its own; fp32 and int8 files."""
        nodes, inits, last = [], [], "x"
        for i, (k, n) in enumerate(weights):
            w = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
            inits.append(numpy_helper.from_array(w, f"w{i}"))
            nodes.append(helper.make_node("MatMul", [last, f"w{i}"], [f"y{i}"]))
            last = f"y{i}"
        graph = helper.make_graph(
            nodes,
            name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, weights[0][0]])],
            [helper.make_tensor_value_info(last, TensorProto.FLOAT, [rows, weights[-1][1]])],
            initializer=inits,
        )
        fp32, int8 = scratch / f"{name}.onnx", scratch / f"{name}.int8.onnx"
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        onnx.save(model, fp32, save_as_external_data=True, location=f"{name}.data")
        quantize_dynamic(
            fp32, int8, per_channel=True, weight_type=QuantType.QInt8, use_external_data_format=True
        )
        return fp32, int8

    def best_ms(path: Path, x: np.ndarray) -> float:
        session = floor_session(args, path)
        return min(
            timed(lambda s=session, f={"x": x}: s.run(None, f), 20)["median_ms"] for _ in range(5)
        )

    for m, k, n in sorted({(m, k, n) for m, k, n, _ in products}):
        fp32, int8 = save_chain(product_file(scratch, (m, k, n), "fp32").stem, [(k, n)], m)
        assert int8 == product_file(scratch, (m, k, n), "int8")
        x = rng.standard_normal((m, k)).astype(np.float32)
        shape: dict[str, float] = {}
        for precision, path in (("fp32", fp32), ("int8", int8)):
            best = best_ms(path, x)
            shape[f"{precision}_ms"] = best
            shape[f"{precision}_gflops"] = 2 * m * k * n / (best / 1000) / 1e9
        out["shapes"][f"{m}x{k}x{n}"] = shape
    for precision in ("fp32", "int8"):
        out[f"{precision}_floor_ms"] = sum(
            count * out["shapes"][f"{m}x{k}x{n}"][f"{precision}_ms"] for m, k, n, count in products
        )
    # The floor above repeats one product, its weights hot in cache. A tower streams each
    # layer's own weights: the MLPs of every layer, chained, show what that costs.
    mlp = [(m, k, n, c) for m, k, n, c in products if m > 1 and k != n]
    if len(mlp) == 2 and mlp[0][3] == mlp[1][3] and mlp[0][2] == mlp[1][1]:
        (rows, d, i, layers), _ = mlp
        fp32, int8 = save_chain("mlp-chain", [(d, i), (i, d)] * layers, rows)
        x = rng.standard_normal((rows, d)).astype(np.float32)
        out["mlp_chain"] = {"layers": layers}
        for precision, path in (("fp32", fp32), ("int8", int8)):
            hot = sum(
                out["shapes"][f"{rows}x{a}x{b}"][f"{precision}_ms"] for a, b in ((d, i), (i, d))
            )
            out["mlp_chain"][f"{precision}_ratio"] = best_ms(path, x) / layers / hot
    out["model_gflop_per_query"] = sum(2 * m * k * n * c for m, k, n, c in products) / 1e9
    (scratch / "products.json").write_text(json.dumps([list(p) for p in products]))
    return out


def tower_products(args: argparse.Namespace, length: int = 64) -> list[tuple[int, int, int, int]]:
    """The weight products of one query as (rows, k, n, count): from the checkpoint's
    config (per layer q, k, v, out [L, d] x [d, d], MLP [L, d] x [d, i] and back, plus the
    head [1, d] x [d, d]), else every weight MatMul/Gemm of the first bundle at L rows."""
    if getattr(args, "checkpoint", None):
        config = json.loads((Path(args.checkpoint) / "config.json").read_text())
        text = config.get("text_config", config)
        d, i = int(text["hidden_size"]), int(text["intermediate_size"])
        layers = int(text["num_hidden_layers"])
        return [
            (length, d, d, 4 * layers),
            (length, d, i, layers),
            (length, i, d, layers),
            (1, d, d, 1),
        ]
    import onnx

    model = onnx.load(str(Path(args.bundle_dir) / "text_model.onnx"), load_external_data=False)
    dims = {init.name: list(init.dims) for init in model.graph.initializer}
    counts: dict[tuple[int, int, int], int] = {}
    for node in model.graph.node:
        if node.op_type in ("MatMul", "Gemm", "FusedMatMul", "FusedGemm"):
            shape = dims.get(node.input[1]) if len(node.input) > 1 else None
            if shape and len(shape) == 2:
                key = (length, shape[0], shape[1])
                counts[key] = counts.get(key, 0) + 1
    return [(m, k, n, c) for (m, k, n), c in counts.items()]


# --------------------------------------------------------------------------- driver


def run_worker(kind: str, args: argparse.Namespace, **extra: str) -> dict[str, Any]:
    command = [
        sys.executable,
        __file__,
        "--worker",
        kind,
        "--threads",
        str(args.threads),
        "--runs",
        str(args.runs),
        "--allow-spinning",
        args.allow_spinning,
        "--batches",
        ",".join(map(str, args.batches)),
    ]
    for key, value in extra.items():
        command += [f"--{key.replace('_', '-')}", value]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGLIP_")}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(ROOT / "handler"), env.get("PYTHONPATH", "")]
    )
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} worker failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--bundle",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="an artifact bundle to measure (repeat: fp32=DIR int8=DIR)",
    )
    parser.add_argument(
        "--checkpoint", help="save_pretrained dir of the same weights (PyTorch leg)"
    )
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None, help="default: CPUs available")
    parser.add_argument(
        "--memory-sizes",
        default="1024,1769,3538",
        help="Lambda memory sizes (MB) for the cost model (README: 1024, 1769, 3538)",
    )
    parser.add_argument(
        "--latency-budgets",
        default="30,50,100,150,250",
        help="latency budgets (ms) for the cheapest-choice table",
    )
    parser.add_argument(
        "--latency",
        action="append",
        default=[],
        metavar="NAME=THREADS:MS,...",
        help="print only the cost model, from these single-query latencies instead of "
        "measuring (e.g. fp32=1:127,2:80 int8=1:42,2:26: handler medians at 1 and 2 threads)",
    )
    parser.add_argument(
        "--allow-spinning",
        choices=["true", "false"],
        default="true",
        help="SIGLIP_ORT_ALLOW_SPINNING for the ORT legs (true: as template.yaml deploys)",
    )
    parser.add_argument(
        "--tokenizer",
        default=os.environ.get("SIGLIP_BENCH_TOKENIZER") or None,
        help="the real tokenizer.json the bundles were made with (make_full_model.py "
        "--tokenizer; default $SIGLIP_BENCH_TOKENIZER): checks and prints that each bundle "
        "has its vocabulary",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measure every leg this many times, alternating their order, and print the "
        "ratios of each repeat and their range",
    )
    parser.add_argument(
        "--no-one-thread",
        action="store_true",
        help="skip the 1-thread legs (the cost model's below-one-vCPU latency)",
    )
    parser.add_argument("--json", help="also write all figures here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--bundle-dir", help=argparse.SUPPRESS)
    parser.add_argument("--vectors-out", help=argparse.SUPPRESS)
    parser.add_argument("--floor-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.batches = [int(b) for b in str(args.batches).split(",")]
    if args.threads is None:
        from siglip_text.config import available_cpus

        args.threads = available_cpus()
    if args.worker:
        worker = {"ort": worker_ort, "torch": worker_torch, "floor": worker_floor}[args.worker]
        print(json.dumps(worker(args)))
        return
    if args.latency:
        given = {
            name: {int(t): float(ms) for t, ms in (pair.split(":") for pair in pairs.split(","))}
            for name, pairs in (item.split("=", 1) for item in args.latency)
        }
        print("\n".join(cost_report(given, args, source="the given latencies (not measured here)")))
        return
    bundles = dict(item.split("=", 1) for item in args.bundle) or {
        "fp32": str(ROOT / "handler" / "siglip_text" / "demo")
    }
    bundles = {name: str(Path(path).expanduser()) for name, path in bundles.items()}
    import tempfile

    if args.tokenizer:
        print(tokenizer_note(Path(args.tokenizer).expanduser(), bundles), file=sys.stderr)
    tmp = Path(tempfile.mkdtemp(prefix="siglip-bench-"))
    runs = []
    for repeat in range(args.repeat):
        # Alternate the order of the legs between repeats: a drift in the machine's load
        # then biases no leg more than another.
        order = list(bundles) if repeat % 2 == 0 else list(reversed(bundles))
        print(f"[bench] repeat {repeat + 1} of {args.repeat}: {', '.join(order)}", file=sys.stderr)
        runs.append(measure(args, bundles, order, tmp / str(repeat)))
        if args.json:  # as it goes: a failure later keeps what was measured
            Path(args.json).write_text(json.dumps(runs, indent=2))
    figures = runs[0]
    if args.json:
        Path(args.json).write_text(json.dumps(figures if len(runs) == 1 else runs, indent=2))
    print(report(figures, bundles, args))
    if len(runs) > 1:
        print(spread(runs, bundles, args))


def measure(
    args: argparse.Namespace, bundles: dict[str, str], order: list[str], tmp: Path
) -> dict[str, Any]:
    """Every leg once, in ``order``, each in its own process, one after another."""
    import numpy as np

    tmp.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {"threads": args.threads, "batches": args.batches, "runs": args.runs}
    first = next(iter(bundles.values()))
    floor_dir = tmp / "floor"
    paired: dict[str, str] = {}
    try:
        extra = {"checkpoint": str(Path(args.checkpoint).expanduser())} if args.checkpoint else {}
        figures["floor"] = run_worker(
            "floor", args, bundle_dir=first, floor_dir=str(floor_dir), **extra
        )
        if 1 in args.batches:
            paired = {"floor_dir": str(floor_dir)}
    except SystemExit as exc:  # onnx not installed: no floor
        figures["floor"] = {"error": str(exc).splitlines()[0]}
    for name in order:
        path = bundles[name]
        figures[name] = run_worker(
            "ort", args, bundle_dir=path, vectors_out=str(tmp / f"{name}.npy"), **paired
        )
        if args.threads > 1 and 1 in args.batches and not args.no_one_thread:
            # The cost model needs the 1-vCPU latency too (Lambda below 3,538 MB).
            one = argparse.Namespace(**{**vars(args), "threads": 1, "batches": [1]})
            single = run_worker("ort", one, bundle_dir=path, vectors_out=str(tmp / "one.npy"))
            figures[name]["one_thread_ms"] = single["latency"]["1"]["handler"]["median_ms"]
    if args.checkpoint:
        figures["torch"] = run_worker(
            "torch",
            args,
            checkpoint=str(Path(args.checkpoint).expanduser()),
            bundle_dir=first,
            vectors_out=str(tmp / "torch.npy"),
        )
    reference = tmp / ("torch.npy" if args.checkpoint else f"{next(iter(bundles))}.npy")
    figures["fidelity"] = {
        name: float((np.load(tmp / f"{name}.npy") * np.load(reference)).sum(axis=1).min())
        for name in bundles
    }
    return figures


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


if __name__ == "__main__":
    main()
