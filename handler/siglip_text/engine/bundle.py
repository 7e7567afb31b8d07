"""The bundle: its file names and the typed manifest that owns every field export writes.

A bundle is a directory with ``manifest.json``, ``text_model.onnx`` (and its weights file,
``text_model.onnx.data``, when export wrote one) and ``tokenizer.json``. The manifest is a
language-neutral JSON file: the four contract fields are required; the fields export records
(files, graph optimization, precision, provenance, checks) are typed here; unknown fields are
kept, so one canonical file can be shared by several services. Export builds its manifest
through `Manifest`; the runtime reads it through `load_manifest`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    ValidationError,
    field_validator,
    model_serializer,
)

from .contract import REVISION_PATTERN, Contract, Digest
from .errors import ModelLoadError
from .json_value import JSONObject

MANIFEST_FILE = "manifest.json"
ONNX_FILE = "text_model.onnx"
TOKENIZER_FILE = "tokenizer.json"

#: The ONNX Runtime optimization level export applies once, offline (tools/export/ort_optimize.py).
#: "extended" is portable across CPUs ("all" adds layout transforms that tie a saved graph to
#: one instruction set); a graph recorded with it loads with optimizations off.
OFFLINE_OPTIMIZATION = "extended"

Precision = Literal["fp32", "int8"]
Lowercase = Literal["unicode", "ascii", "none"]


class BundlePaths(NamedTuple):
    """Where the three artifacts are (they may live in different directories)."""

    manifest: Path
    onnx: Path
    tokenizer: Path

    @classmethod
    def in_dir(cls, directory: Path) -> BundlePaths:
        return cls(directory / MANIFEST_FILE, directory / ONNX_FILE, directory / TOKENIZER_FILE)


class FileEntry(BaseModel):
    """What export recorded of one file: its sha256 and size in bytes."""

    model_config = ConfigDict(extra="allow", frozen=True)

    sha256: str | None = None
    size: StrictInt | None = None


class GraphBuild(BaseModel):
    """How export wrote the graph (tools/export/tower_graph.py), for the manifest.

    ``forward``: ``fusible`` is the tower rewritten for ONNX Runtime's fused kernels,
    ``transformers`` the library's own forward; ``last_layer``: whether the last layer
    computes every position or only the pooled one; ``fused_operators``: the count of each
    fused operator in the graph as written (before quantization).
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    forward: Literal["fusible", "transformers"]
    last_layer: Literal["pooled position only", "all positions"]
    fused_operators: dict[str, StrictInt] = Field(default_factory=dict)


class TokenizerMerges(BaseModel):
    """What export removed from ``tokenizer.json`` (tools/export/tokenizer_merges.py): the
    BPE merges no normalized text can use, and the vocabulary entries no text can produce,
    so that it loads faster; every id kept is unchanged.

    ``before``/``after`` count merges, ``entries_before``/``entries_after`` the model's
    vocabulary entries; ``token_ids`` is the id range of the tokenizer as it was (ids
    0..token_ids-1): with entries removed the file no longer tells it, and token-id inputs
    may use any of them (each has its row in the embedding table).
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    before: StrictInt = Field(ge=0)
    after: StrictInt = Field(ge=0)
    rule: str
    entries_before: StrictInt | None = Field(default=None, ge=0)
    entries_after: StrictInt | None = Field(default=None, ge=0)
    token_ids: StrictInt | None = Field(default=None, gt=0)


class SelfCheck(BaseModel):
    """What init compares its probe with (loading.py): the probe text's vector as the fp32
    graph computed it at export, and the lowest cosine this bundle's vector may have to it.

    ``measured_cosine`` is what the exporting CPU (``measured_on``) computed with this bundle;
    ``min_cosine`` is that less a margin (``self_check.MARGIN``): a CPU whose kernels compute
    different products (an int8 kernel that saturates) falls below it.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    text: str
    reference: list[float] = Field(min_length=1)
    min_cosine: float = Field(ge=-1.0, le=1.0)
    measured_cosine: float | None = None
    measured_on: str | None = None


class MemoryNeed(BaseModel):
    """What the bundle needs resident in a Lambda function (MiB; sizing.py reads it).

    ``minimum_mb``: the weights every query reads (every layer, the head) plus the runtime;
    below it the function cannot hold them and init fails. ``recommended_mb``: the whole
    model resident (the token table too, whose rows a query reads a few at a time). Derived
    at export from the graph's sizes, not measured; ``basis`` says how.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    minimum_mb: StrictInt = Field(gt=0)
    recommended_mb: StrictInt = Field(gt=0)
    basis: str


class _Record(BaseModel):
    """A section export writes: typed fields, unknown fields kept as they are."""

    model_config = ConfigDict(extra="allow", frozen=True)


class VectorAgreement(_Record):
    """Two sets of vectors compared row by row (tools/parity.py ``VectorStats``)."""

    count: StrictInt = Field(ge=0)
    cosine_min: float
    cosine_mean: float
    cosine_p01: float | None = None
    max_abs_error: float | None = None
    worst_index: StrictInt | None = None


class RankAgreement(_Record):
    """Top-k rankings of a corpus compared query by query (tools/parity.py ``OverlapStats``)."""

    k: StrictInt = Field(gt=0)
    queries: StrictInt = Field(ge=0)
    corpus: StrictInt = Field(ge=0)
    mean: float
    min: float
    top1_agreement: float | None = None


class ExportCheck(_Record):
    """The export's check of the bundle against the checkpoint (tools/export/checks.py):
    the contract's ids on ``texts`` edge cases, and the vectors against PyTorch."""

    texts: StrictInt = Field(ge=0)
    tokenizer_mismatches: StrictInt = Field(ge=0)
    tokenizer_reference: str
    vs_pytorch: VectorAgreement


class TokenEmbedding(_Record):
    """The token table quantized per row: its initializer and shape."""

    initializer: str
    shape: list[StrictInt]


WeightForm = Literal["int7", "int8", "uint8"]


class Quantization(_Record):
    """How an int8 bundle was quantized (tools/export/quantize.py).

    ``saturation_free``: no pair of the weights' products can overflow a 16-bit sum, so any
    int8 kernel computes them exactly; init refuses a bundle without it on a CPU whose kernel
    saturates (self_check.check_int8_kernel). Bundles exported before the 7-bit form do not
    record it: absent reads as False. ``largest_pair_of_products`` and ``token_embedding``
    are written as null when there is none (uint8 weights; no token table found).
    """

    method: str
    weight_form: WeightForm | None = None
    weight_form_note: str | None = None
    saturation_free: bool = False
    largest_pair_of_products: StrictInt | None = None
    matmul_integer_nodes: StrictInt | None = None
    qattention_nodes: StrictInt | None = None
    token_embedding: TokenEmbedding | None = None

    @model_serializer(mode="wrap")
    def _written_nulls(self, handler: SerializerFunctionWrapHandler) -> JSONObject:
        """Export writes these two as null rather than leaving them out (a bundle that
        recorded them reads them back as written)."""
        data: JSONObject = handler(self)
        if self.weight_form is None:  # an earlier version's record: as it was read
            return data
        nulls = ("largest_pair_of_products", "token_embedding")
        names = [name for name in type(self).model_fields if name in data or name in nulls]
        return {
            **{name: data.get(name) for name in names},
            **{k: v for k, v in data.items() if k not in names},
        }


class Fidelity(_Record):
    """An int8 bundle against the fp32 graph of the same checkpoint (tools/export/checks.py):
    cosine on the edge cases and queries, top-10 overlap over a synthetic corpus."""

    reference: str
    cosine: VectorAgreement
    top10_overlap: RankAgreement
    corpus: str
    corpus_mean_pairwise_cosine: float | None = None
    fp32_vs_pytorch: VectorAgreement | None = None


class CheckpointTokenizer(_Record):
    """What the installed transformers makes of the checkpoint's tokenizer, where it departs
    from the contract (tools/export/checkpoint_tokenizer.py); recorded, never a failure.
    ``note`` is present only when a GPU pipeline calling it would depart from the contract."""

    transformers: str
    #: written as ``class`` (a Python keyword)
    tokenizer_class: str | None = Field(
        default=None,
        validation_alias=AliasChoices("class", "tokenizer_class"),
        serialization_alias="class",
    )
    call: str | None = None
    post_processing: str | None = None
    content_ids: str | None = None
    special_token_strings: str | None = None
    note: str | None = None


class Libraries(_Record):
    """The versions export ran with."""

    siglip_text: str
    transformers: str | None = None
    torch: str | None = None
    onnx: str | None = None
    onnxruntime: str | None = None
    tokenizers: str | None = None
    numpy: str | None = None
    python: str | None = None


class Manifest(BaseModel):
    """What the artifacts claim to be. ``revision`` must be an immutable commit SHA."""

    model_config = ConfigDict(extra="allow", frozen=True)

    # The contract: required.
    repository: str = Field(min_length=1)
    revision: str
    embedding_dimension: StrictInt = Field(gt=0)
    text_max_token_length: StrictInt = Field(gt=1)

    # What export records (absent in a hand-made bundle).
    files: dict[str, FileEntry] = Field(default_factory=dict)
    graph_optimization: str | None = None
    precision: Precision | None = None
    lowercase: Lowercase | None = None
    opset: StrictInt | None = None
    graph: GraphBuild | None = None
    tokenizer_merges: TokenizerMerges | None = None
    logit_scale: float | None = None
    logit_bias: float | None = None
    probability: str | None = None
    source: str | None = None
    source_kind: str | None = None
    model_type: str | None = None
    architecture: str | None = None
    output: str | None = None
    exported_at: str | None = None
    export_seconds: float | None = None
    libraries: Libraries | None = None
    export_check: ExportCheck | None = None
    quantization: Quantization | None = None
    fidelity: Fidelity | None = None
    self_check: SelfCheck | None = None
    checkpoint_tokenizer: CheckpointTokenizer | None = None
    memory: MemoryNeed | None = None  # what a Lambda function needs resident (sizing.py)
    # The contract fingerprint and the document it is the digest of (engine/fingerprint.py).
    fingerprint: Digest | None = None
    contract: Contract | None = None

    @field_validator("repository")
    @classmethod
    def _repository_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("revision")
    @classmethod
    def _revision_is_commit_sha(cls, value: str) -> str:
        if not re.fullmatch(REVISION_PATTERN, value):
            raise ValueError(
                "must be a full 40-character hexadecimal commit SHA; tags and branch names "
                "are mutable and refused"
            )
        return value.lower()

    @property
    def extras(self) -> JSONObject:
        """Fields this model does not know (another producer's, kept as they are)."""
        return dict(self.model_extra or {})

    @property
    def saturation_free(self) -> bool:
        """The int8 weights cannot overflow a pair of products on any kernel (`Quantization`)."""
        return self.quantization is not None and self.quantization.saturation_free

    @property
    def optimized_offline(self) -> bool:
        """The graph was optimized at export: loading it need not optimize it again."""
        return self.graph_optimization == OFFLINE_OPTIMIZATION

    def recorded_files(self) -> list[str]:
        """Plain file names in the ``files`` section (may be empty)."""
        return [name for name in self.files if name and "/" not in name]

    def recorded_file(self, name: str) -> FileEntry | None:
        """The ``files[name]`` entry (sha256, size), if export recorded one."""
        return self.files.get(name)

    def to_json(self) -> str:
        """The manifest as export writes it: recorded fields only, unknown fields kept."""
        data = self.model_dump(mode="json", exclude_none=True, by_alias=True)
        if not data.get("files"):
            data.pop("files", None)
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def load_manifest(path: Path) -> Manifest:
    """Read and validate the manifest; every failure names the file and the field."""
    raw = read_artifact(path, "manifest")
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"manifest {path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ModelLoadError(f"manifest {path}: must be a JSON object")
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '?'}: {err['msg']}"
            for err in exc.errors(include_url=False, include_input=False)
        )
        raise ModelLoadError(f"manifest {path}: {problems}") from None


def read_artifact(path: Path, what: str) -> bytes:
    """Read a whole artifact file, failing with a message that names it."""
    check_file(path, what)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ModelLoadError(f"{what} {path}: cannot be read ({exc.strerror})") from None


def check_file(path: Path, what: str, manifest: Manifest | None = None) -> None:
    """The file exists, is a readable non-empty regular file, and has the recorded size."""
    if not path.exists():
        raise ModelLoadError(f"{what} {path}: file not found")
    if not path.is_file():
        raise ModelLoadError(f"{what} {path}: not a regular file")
    if not os.access(path, os.R_OK):
        raise ModelLoadError(f"{what} {path}: not readable (permission denied)")
    size = path.stat().st_size
    if size == 0:
        raise ModelLoadError(f"{what} {path}: file is empty")
    recorded = manifest.recorded_file(path.name) if manifest is not None else None
    if recorded is not None and recorded.size is not None and recorded.size != size:
        raise ModelLoadError(
            f"{what} {path}: size {size} bytes differs from the manifest's {recorded.size} "
            "(truncated or replaced file)"
        )


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
