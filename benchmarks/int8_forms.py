#!/usr/bin/env python3
"""The int8 weight forms side by side at a base tower's matrix shapes (docs/cpus.md).

    python -m benchmarks.int8_forms [--tokens 64] [--runs 200]
    python -m benchmarks.int8_forms --bundle today=DIR --bundle int7=DIR [--runs 60]

With ``--bundle``: whole towers instead, one text per query (the ONNX Runtime session as
init builds it, without init's self-check, so that a full-range int8 bundle can be timed on
a CPU where init refuses it), bundles interleaved with rotating order; ratios to the first.

One graph per form: ``DynamicQuantizeLinear`` of float activations [tokens, 768], then
``MatMulInteger`` with constant weights [768, 3072] and [3072, 768] (a base layer's MLP), as
``quantize_dynamic`` writes them: int8 (-127..127, full range), int7 (-64..64, the default) and
uint8 (U8U8). ONNX Runtime's graph optimizations are on, as in a bundle. Prints the median
time of each form, interleaved round by round, and the ratio to int8; the results of the
int8 form are compared with exact integer arithmetic (numpy) to show whether this CPU's
kernel saturates. Needs onnx (export or test extra).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

FORMS = {"int8": (np.int8, -127, 127), "int7": (np.int8, -64, 64), "uint8": (np.uint8, 0, 255)}


def graph(weights: list[np.ndarray]) -> bytes:
    """Per weight: its own float input, ``DynamicQuantizeLinear``, ``MatMulInteger``."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, inputs, outputs = [], [], [], []
    for i, w in enumerate(weights):
        zero = np.array(128 if w.dtype == np.uint8 else 0, dtype=w.dtype)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(zero, f"wz{i}")]
        nodes.append(
            helper.make_node("DynamicQuantizeLinear", [f"x{i}"], [f"q{i}", f"s{i}", f"z{i}"])
        )
        nodes.append(
            helper.make_node("MatMulInteger", [f"q{i}", f"w{i}", f"z{i}", f"wz{i}"], [f"y{i}"])
        )
        inputs.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [None, w.shape[0]]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.INT32, None))
    model = helper.make_model(
        helper.make_graph(nodes, "forms", inputs, outputs, inits),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    return bytes(model.SerializeToString())


def time_bundles(bundles: list[str], runs: int, threads: int) -> dict[str, object]:
    from pathlib import Path

    from siglip_text.engine.bundle import BundlePaths, load_manifest
    from siglip_text.engine.encoder import OnnxEncoder, SessionConfig
    from siglip_text.engine.loading import graph_optimization_level
    from siglip_text.engine.tokenization import SiglipTokenizer

    texts = ["a photo of a cat sitting on a wooden table", "two people riding bicycles"]
    encoders, batches = {}, {}
    for item in bundles:
        name, _, directory = item.partition("=")
        paths = BundlePaths.in_dir(Path(directory).expanduser())
        manifest = load_manifest(paths.manifest)
        pruned = manifest.tokenizer_merges
        tokenizer = SiglipTokenizer.from_file(
            paths.tokenizer,
            max_length=manifest.text_max_token_length,
            token_ids=pruned.token_ids if pruned is not None else None,
        )
        config = SessionConfig(
            intra_op_threads=threads,
            graph_optimization=graph_optimization_level("auto", manifest),
        )
        encoders[name] = OnnxEncoder(
            paths.onnx,
            output_name="text_embeds",
            dimension=manifest.embedding_dimension,
            max_length=manifest.text_max_token_length,
            config=config,
        )
        batches[name] = [tokenizer.encode_texts([t]).ids for t in texts]
    names = list(encoders)
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(runs):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            ids = batches[name][round_ % len(texts)]
            began = time.perf_counter()
            encoders[name].encode(ids)
            times[name].append(time.perf_counter() - began)
    first = statistics.median(times[names[0]])
    return {
        name: {
            "median_ms": round(statistics.median(t) * 1000, 2),
            f"vs_{names[0]}": round(statistics.median(t) / first, 3),
        }
        for name, t in times.items()
    } | {"runs": runs, "threads": threads, "batch": 1}


def main() -> int:
    import onnxruntime as ort

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bundle", action="append", default=[], metavar="NAME=DIR")
    args = parser.parse_args()
    if args.bundle:
        print(json.dumps(time_bundles(args.bundle, args.runs, args.threads), indent=2))
        return 0
    rng = np.random.default_rng(0)
    hidden, mlp = 768, 3072
    sessions, weights_by_form = {}, {}
    for form, (dtype, low, high) in FORMS.items():
        weights = [
            rng.integers(low, high + 1, size=shape).astype(dtype)
            for shape in ((hidden, mlp), (mlp, hidden))
        ]
        weights_by_form[form] = weights
        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        sessions[form] = ort.InferenceSession(
            graph(weights), options, providers=["CPUExecutionProvider"]
        )
    # GELU-like activations (mostly small, some large): the uint8 range is set by the extremes
    feeds = {
        f"x{i}": rng.standard_normal((args.tokens, w.shape[0])).astype(np.float32)
        for i, w in enumerate(weights_by_form["int8"])
    }
    times: dict[str, list[float]] = {form: [] for form in FORMS}
    names = list(sessions)
    for round_ in range(args.runs):
        for form in names[round_ % 3 :] + names[: round_ % 3]:  # each form first in turn
            session = sessions[form]
            began = time.perf_counter()
            session.run(None, feeds)
            times[form].append(time.perf_counter() - began)
    # exactness: the products against numpy's int64 arithmetic on the same uint8 activations
    exact = {}
    x = feeds["x0"]
    x_low, x_high = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    scale = (x_high - x_low) / 255
    zero = int(np.clip(np.rint(-x_low / scale), 0, 255))
    xq = np.clip(np.rint(x / scale) + zero, 0, 255).astype(np.int64)
    for form, session in sessions.items():
        got = session.run(None, feeds)[0].astype(np.int64)
        w = weights_by_form[form][0].astype(np.int64) - (128 if form == "uint8" else 0)
        want = (xq - zero) @ w
        exact[form] = {"max_abs_error": int(np.abs(got - want).max())}
    base = statistics.median(times["int8"])
    print(
        json.dumps(
            {
                form: {
                    "median_ms": round(statistics.median(t) * 1000, 3),
                    "vs_int8": round(statistics.median(t) / base, 3),
                    **exact[form],
                }
                for form, t in times.items()
            }
            | {"tokens": args.tokens, "runs": args.runs, "threads": args.threads},
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
