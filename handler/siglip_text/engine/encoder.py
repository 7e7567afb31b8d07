"""The ONNX Runtime session: graph checks at load, run, output checks, L2 normalization."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnxruntime as ort

from .errors import InferenceError, ModelLoadError, scrubbed
from .limits import Pace

if TYPE_CHECKING:
    from .limits import Deadline

INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
_INT_TYPES: dict[str, type[np.integer]] = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}


@dataclass(frozen=True)
class SessionConfig:
    """How to build the ORT session (threads are set explicitly: see cpu.usable_cpus)."""

    intra_op_threads: int
    allow_spinning: bool = False
    max_batch_size: int = 32
    #: disable | basic | extended | all; or auto: the bundle's manifest decides
    #: (loading.graph_optimization_level, when the session is built)
    graph_optimization: str = "all"


OPTIMIZATION_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


class OnnxEncoder:
    """Runs the exported text tower and returns L2-normalized float32 vectors.

    SigLIP attends to every position, pads included, and was trained that way; a graph that
    has an ``attention_mask`` input is therefore always fed all ones.
    """

    def __init__(
        self,
        path: Path,
        *,
        output_name: str,
        dimension: int,
        max_length: int,
        config: SessionConfig,
    ) -> None:
        self.path = path
        self.output_name = output_name
        self.dimension = dimension
        self.max_length = max_length
        self.max_batch_size = config.max_batch_size
        self.intra_op_threads = config.intra_op_threads
        self.session = _create_session(path, config)
        self.pace = Pace()  # seconds per input, measured on every chunk (the init probe first)
        self._mask_dtype = self._check_inputs()
        self._check_output()

    def _check_inputs(self) -> type[np.integer] | None:
        inputs = {i.name: i for i in self.session.get_inputs()}
        where = f"ONNX model {self.path}"
        if INPUT_IDS not in inputs:
            raise ModelLoadError(
                f"{where}: graph has no '{INPUT_IDS}' input (inputs: {sorted(inputs)})"
            )
        ids = inputs[INPUT_IDS]
        if ids.type != "tensor(int64)":
            raise ModelLoadError(f"{where}: '{INPUT_IDS}' must be int64, graph says {ids.type}")
        if len(ids.shape) != 2:
            raise ModelLoadError(
                f"{where}: '{INPUT_IDS}' must be rank 2 [batch, {self.max_length}], "
                f"graph says {ids.shape}"
            )
        length = ids.shape[1]
        if isinstance(length, int) and length != self.max_length:
            raise ModelLoadError(
                f"{where}: '{INPUT_IDS}' takes {length} tokens but the manifest's "
                f"text_max_token_length is {self.max_length}"
            )
        extra = sorted(set(inputs) - {INPUT_IDS, ATTENTION_MASK})
        if extra:
            raise ModelLoadError(
                f"{where}: unexpected graph input(s) {extra}; only '{INPUT_IDS}' and an "
                f"optional '{ATTENTION_MASK}' can be fed"
            )
        if ATTENTION_MASK not in inputs:
            return None
        mask = inputs[ATTENTION_MASK]
        if mask.type not in _INT_TYPES or len(mask.shape) != 2:
            raise ModelLoadError(
                f"{where}: '{ATTENTION_MASK}' must be an int32/int64 matrix, graph says "
                f"{mask.type} {mask.shape}"
            )
        return _INT_TYPES[mask.type]

    def _check_output(self) -> None:
        outputs = {o.name: o for o in self.session.get_outputs()}
        where = f"ONNX model {self.path}"
        if self.output_name not in outputs:
            raise ModelLoadError(
                f"{where}: graph has no output '{self.output_name}' (outputs: {sorted(outputs)}); "
                "set SIGLIP_ONNX_OUTPUT_NAME to choose another"
            )
        out = outputs[self.output_name]
        if out.type not in ("tensor(float)", "tensor(float16)", "tensor(double)"):
            raise ModelLoadError(f"{where}: output '{self.output_name}' is {out.type}, not float")
        if len(out.shape) != 2:
            raise ModelLoadError(
                f"{where}: output '{self.output_name}' must be rank 2 [batch, "
                f"{self.dimension}], graph says {out.shape}"
            )
        width = out.shape[1]
        if isinstance(width, int) and width != self.dimension:
            raise ModelLoadError(
                f"{where}: output '{self.output_name}' has dimension {width} but the manifest's "
                f"embedding_dimension is {self.dimension}"
            )

    def encode(self, ids: np.ndarray, deadline: Deadline | None = None) -> np.ndarray:
        """``[n, L]`` int64 ids -> ``[n, D]`` float32 unit vectors, in chunks of max batch.

        With a ``deadline``, each chunk starts only if the rest can still finish in time.
        """
        count = ids.shape[0]
        result = np.empty((count, self.dimension), dtype=np.float32)
        for start in range(0, count, self.max_batch_size):
            chunk = ids[start : start + self.max_batch_size]
            if deadline is not None:
                deadline.check(
                    rows_left=count - start, next_rows=len(chunk), total=count, pace=self.pace
                )
            began = time.perf_counter()
            result[start : start + len(chunk)] = self._run(chunk)
            self.pace.record(time.perf_counter() - began, len(chunk))
        return result

    def _run(self, ids: np.ndarray) -> np.ndarray:
        feeds = {INPUT_IDS: ids}
        if self._mask_dtype is not None:
            feeds[ATTENTION_MASK] = np.ones(ids.shape, dtype=self._mask_dtype)
        try:
            (raw,) = self.session.run([self.output_name], feeds)
        except Exception as exc:
            # Its message names the node and the check that failed (node names are quoted:
            # kept); token ids it quotes are hidden. Logged by the app, never answered.
            raise InferenceError(
                f"ONNX Runtime failed: {type(exc).__name__}: {scrubbed(str(exc), keep_quotes=True)}"
            ) from exc
        return l2_normalize(np.asarray(raw), rows=ids.shape[0], dimension=self.dimension)


def l2_normalize(raw: np.ndarray, *, rows: int, dimension: int) -> np.ndarray:
    """Check shape and finiteness, then L2-normalize each row in float32.

    A zero or non-finite vector is an error: it would silently match nothing (or
    everything) in the index.
    """
    if raw.shape != (rows, dimension):
        raise InferenceError(f"model returned shape {raw.shape}, expected {(rows, dimension)}")
    vectors = raw.astype(np.float32, copy=False)
    if not np.isfinite(vectors).all():
        raise InferenceError("model returned a non-finite value (NaN or infinity)")
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors, dtype=np.float32))
    if not (norms > 0).all() or not np.isfinite(norms).all():
        raise InferenceError("model returned a zero vector, which cannot be normalized")
    unit: np.ndarray = vectors / norms[:, None]
    return unit


def _create_session(path: Path, config: SessionConfig) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = config.intra_op_threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry(
        "session.intra_op.allow_spinning", "1" if config.allow_spinning else "0"
    )
    options.graph_optimization_level = OPTIMIZATION_LEVELS[config.graph_optimization]
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise ModelLoadError(
            f"ONNX model {path}: ONNX Runtime cannot load it ({type(exc).__name__}: {detail})"
        ) from None
