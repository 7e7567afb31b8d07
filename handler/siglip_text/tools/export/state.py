"""What the export's steps share: the options, the typed state they hand on, one log.

`ExportOptions` is what the command line asks for; `ExportState` holds what each step
(steps.py) leaves for the next, one field per thing, typed, so that a step reads what an
earlier one wrote by name; `log` is the export's one progress line (stderr).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ...engine.bundle import (
    OFFLINE_OPTIMIZATION,
    ONNX_FILE,
    TOKENIZER_FILE,
    CheckpointTokenizer,
    ExportCheck,
    Fidelity,
    GraphBuild,
    Lowercase,
    Manifest,
    Precision,
    Quantization,
    SelfCheck,
    TokenizerMerges,
    WeightForm,
)
from .checkpoint import Checkpoint, SourceSpec
from .checks import FP32_MIN_COSINE, INT8_MIN_COSINE, CheckpointReference, Fp32Vectors
from .onnx_export import DEFAULT_OPSET

if TYPE_CHECKING:
    import numpy as np

    from ...engine.service import EmbeddingService


def log(message: str) -> None:
    """The export's progress, one line on stderr (stdout carries the summary)."""
    print(f"[export] {message}", file=sys.stderr, flush=True)


@dataclass
class ExportOptions:
    source: str
    out: Path
    repository: str | None = None
    revision: str | None = None
    precision: Precision = "fp32"
    lowercase: Lowercase = "unicode"
    opset: int = DEFAULT_OPSET
    threads: int | None = None
    force: bool = False
    min_cosine: float = FP32_MIN_COSINE
    int8_min_cosine: float = INT8_MIN_COSINE
    fidelity_corpus: int = 512
    fidelity_queries: int = 128
    # Weights in text_model.onnx.data, which ONNX Runtime memory-maps: the tower loads
    # faster and with less resident memory (docs/performance.md), and the untouched rows of
    # the token table are never read from the image. False keeps one file (only below 2 GB).
    external_data: bool = True
    # ONNX Runtime's graph optimizations, applied once here (see ort_optimize.optimize_graph).
    optimize: bool = True
    # The tower written for ONNX Runtime's fused kernels, last layer at the pooled position
    # only (fusible.py, tower_graph.py); False exports transformers' own forward.
    fuse: bool = True
    # int8: one weight scale per output column (True) or per tensor.
    per_channel: bool = True
    int8_weight_form: WeightForm = "int7"  # quantize.WEIGHT_FORMS
    # Drop the BPE merges no lowercased text can use (tokenizer_merges.py): same ids,
    # a faster tokenizer load at init.
    prune_merges: bool = True
    # Refuse before loading when the machine clearly lacks the memory (memory.py).
    check_memory: bool = True


@dataclass
class ExportState:
    """What the steps hand on; each field is set by the step named beside it and read by
    the later ones. A field a step no longer needs is set back to None by the step that
    last reads it, so that nothing large outlives its use (memory.py)."""

    options: ExportOptions
    spec: SourceSpec
    #: Where an int8 export writes its fp32 graph before quantizing it (inside the output
    #: directory, removed at the end).
    scratch: Path
    checkpoint: Checkpoint | None = None  # load (its tower released by graph)
    #: The contract's ids of the edge-case texts, from the checkpoint's tokenizer.json as
    #: shipped (tokenizer): what the bundle's ids are checked against.
    contract_ids: list[list[int]] = field(default_factory=list)
    merges: TokenizerMerges | None = None  # tokenizer
    checkpoint_tokenizer: CheckpointTokenizer | None = None  # tokenizer
    contract: Manifest | None = None  # reference: the four contract fields
    pytorch: CheckpointReference | None = None  # reference
    #: The token table's (rows, width), for the memory the bundle needs (sizing.py).
    table_shape: tuple[int, int] = (0, 0)
    graph: GraphBuild | None = None  # graph
    fp32: EmbeddingService | None = None  # check_fp32 (closed before quantizing)
    check: ExportCheck | None = None  # check_fp32, then check_int8
    probe: np.ndarray | None = None  # check_fp32: the fp32 vector of the probe text
    fp32_vectors: Fp32Vectors | None = None  # fp32_vectors
    quantization: Quantization | None = None  # quantize
    int8: EmbeddingService | None = None  # check_int8
    fidelity: Fidelity | None = None  # check_int8
    self_check: SelfCheck | None = None  # self_check

    @property
    def out(self) -> Path:
        return self.options.out

    @property
    def onnx_path(self) -> Path:
        return self.out / ONNX_FILE

    @property
    def tokenizer_path(self) -> Path:
        return self.out / TOKENIZER_FILE

    @property
    def fp32_path(self) -> Path:
        """The fp32 graph: the bundle's own for fp32, the scratch copy for int8."""
        return self.onnx_path if self.options.precision == "fp32" else self.scratch / ONNX_FILE

    def require_checkpoint(self) -> Checkpoint:
        if self.checkpoint is None:
            raise RuntimeError("the load step has not run")
        return self.checkpoint

    def fields(self, *, served: bool) -> Manifest:
        """The manifest's contract and graph fields: as the fp32 graph was written, or as
        the served graph is (optimized offline when the options say so)."""
        if self.contract is None or self.graph is None:
            raise RuntimeError("the reference and graph steps have not run")
        base = self.contract.model_copy(update={"graph": self.graph})
        if served and self.options.optimize:
            return base.model_copy(update={"graph_optimization": OFFLINE_OPTIMIZATION})
        return base
