#!/usr/bin/env python3
"""The legs of `run.py`, each run in its own process by `protocol.run_worker`: ``ort`` (init
through the Lambda entry point, raw ``session.run`` vs the handler, the paired floor),
``torch`` (transformers on PyTorch) and ``floor`` (ORT's own MatMul at the query's shapes).

Nothing but the standard library is imported before a leg starts: ``ort`` times the init
as Lambda runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.protocol import ROOT, worker_arguments

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
    os.environ.setdefault("SIGLIP_AUTH_MODE", "none")
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
    service = lambda_function.parts.service
    bundle = Path(args.bundle_dir)
    files = sum(p.stat().st_size for p in bundle.iterdir() if p.name.startswith("text_model"))

    from devkit.lambda_context import LambdaContext

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
    # the peak after the queries: what the function holds while it serves
    results["serving"] = rss_mb()
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
    if not products:
        return None

    def product_ms(m: int, k: int, n: int) -> float:
        # A session of its own, gone once timed: a live session's threads spin after each
        # run and slow the next session's, inflating its floor by a third or more.
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
    from siglip_text.engine.tokenization import SiglipTokenizer

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
    if not products:
        # Nothing to time: the run reports the floor as unavailable (`run.measure`).
        raise SystemExit(
            f"no weight products found in {Path(args.bundle_dir) / 'text_model.onnx'} "
            f"(operators read: {', '.join(WEIGHT_INPUT)}); pass --checkpoint for the floor"
        )
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


#: Where each weight-product operator takes its constant weight ([k, n]). The plain
#: operators are what an fp32 export before ORT's optimizer has; the rest are what
#: ``siglip-text export`` writes: ``Attention`` (q, k and v in one [d, 3d] weight) in an
#: optimized fp32 graph, and in an int8 one the quantized weights of ``QAttention``,
#: ``DynamicQuantizeMatMul``, ``MatMulIntegerToFloat`` and ``MatMulInteger``.
WEIGHT_INPUT = {
    "MatMul": 1,
    "Gemm": 1,
    "FusedMatMul": 1,
    "FusedGemm": 1,
    "Attention": 1,
    "QAttention": 1,
    "DynamicQuantizeMatMul": 1,
    "MatMulIntegerToFloat": 1,
    "MatMulInteger": 1,
}


def tower_products(args: argparse.Namespace, length: int = 64) -> list[tuple[int, int, int, int]]:
    """The weight products of one query as (rows, k, n, count): from the checkpoint's
    config (per layer q, k, v, out [L, d] x [d, d], MLP [L, d] x [d, i] and back, plus the
    head [1, d] x [d, d]), else every operator of the first bundle with a constant 2-D
    weight (`WEIGHT_INPUT`) at L rows. Empty when the graph has none that it knows: the
    floor is then unavailable, not zero."""
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
        at = WEIGHT_INPUT.get(node.op_type)
        if at is None or len(node.input) <= at:
            continue
        shape = dims.get(node.input[at])
        if shape and len(shape) == 2:
            key = (length, shape[0], shape[1])
            counts[key] = counts.get(key, 0) + 1
    return [(m, k, n, c) for (m, k, n), c in counts.items()]


WORKERS = {"ort": worker_ort, "torch": worker_torch, "floor": worker_floor}


def main() -> None:
    args = worker_arguments()
    print(json.dumps(WORKERS[args.kind](args)))


if __name__ == "__main__":
    main()
