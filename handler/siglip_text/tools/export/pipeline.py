"""The export pipeline: a SigLIP / SigLIP 2 checkpoint -> a checked bundle. Export extra.

Writes ``text_model.onnx`` (``input_ids [batch, 64]`` -> ``text_embeds``, the pooled output,
not normalized; weights in ``text_model.onnx.data`` past protobuf's 2 GB), ``tokenizer.json``
(the checkpoint's tokenizer with the contract's lowercasing, EOS and padding written in) and
``manifest.json``. Before the manifest is written, the bundle is loaded with
``build_service`` (the init phase ``serve`` and Lambda run) and compared with the contract's
ids and PyTorch (checks.py); what the installed transformers makes of the checkpoint's
tokenizer, where it departs from the contract, is recorded (``checkpoint_tokenizer``). An
fp32 graph below cosine 0.99999 fails the export and leaves no manifest, so the directory
cannot be served. The command line is command.py, the summary
report.py.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ...bundle import (
    MANIFEST_FILE,
    OFFLINE_OPTIMIZATION,
    ONNX_FILE,
    TOKENIZER_FILE,
    BundlePaths,
    FileEntry,
    Lowercase,
    Manifest,
    MemoryNeed,
    Precision,
    TokenizerMerges,
    sha256_file,
)
from ...config import available_cpus
from ...encoder import SessionConfig
from ...loading import build_service, graph_optimization_level
from ...service import EmbeddingService
from ...sizing import memory_need
from ...tokenization import SiglipTokenizer
from ..errors import ToolError
from .checks import (
    FP32_MIN_COSINE,
    INT8_MIN_COSINE,
    MAX_LENGTH,
    ExportCheckFailed,
    check_against_checkpoint,
    checkpoint_reference,
    describe_checkpoint_tokenizer,
    fp32_fidelity_vectors,
    measure_int8_fidelity,
    probe_reference,
    record_self_check,
)
from .memory import (
    check_memory,
    export_memory_need,
    machine_memory,
    release_memory,
    text_tower_parameters,
)
from .onnx_export import DEFAULT_OPSET, external_data_path
from .ort_optimize import optimize_graph
from .tokenizer import apply_contract, check_vocabulary
from .tower_graph import CHILD_PROCESS_BYTES, build_graph, build_graph_in_child


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
    # Weights in text_model.onnx.data, which ONNX Runtime memory-maps: a base fp32 tower
    # then loads in 0.37 s instead of 2.9 s with a peak RSS of 513 MB instead of 1,885 MB
    # (measured on this project's 2-core machines), and the untouched rows of the token
    # table are never read from the image. False keeps one file (only below 2 GB).
    external_data: bool = True
    # ONNX Runtime's graph optimizations, applied once here (see ort_optimize.optimize_graph).
    optimize: bool = True
    # The tower written for ONNX Runtime's fused kernels, last layer at the pooled position
    # only (fusible.py, tower_graph.py); False exports transformers' own forward.
    fuse: bool = True
    # int8: one weight scale per output column (True) or per tensor.
    per_channel: bool = True
    int8_weight_form: str = "int7"  # quantize.WEIGHT_FORMS
    # Drop the BPE merges no lowercased text can use (tokenizer_merges.py): same ids,
    # a faster tokenizer load at init.
    prune_merges: bool = True
    # Refuse before loading when the machine clearly lacks the memory (memory.py).
    check_memory: bool = True


@dataclass
class ExportReport:
    out: Path
    manifest: Manifest
    timings: dict[str, float] = field(default_factory=dict)


def log(message: str) -> None:
    print(f"[export] {message}", file=sys.stderr, flush=True)


def validate(options: ExportOptions) -> Any:
    """Fail closed before loading anything: SHA revision, repository, output directory."""
    from .checkpoint import resolve_source

    spec = resolve_source(options.source, revision=options.revision, require_revision=True)
    if spec.kind == "local":
        missing = [
            flag
            for flag, value in (("--repository", options.repository), ("--revision", spec.revision))
            if not value
        ]
        if missing:
            raise ToolError(
                f"{options.source} is a local directory: {' and '.join(missing)} must say which "
                "Hub repository and commit it was saved from (the manifest records them)"
            )
    if options.repository is not None and not options.repository.strip():
        raise ToolError("--repository must not be blank")
    if options.precision not in ("fp32", "int8"):
        raise ToolError(f"--precision must be fp32 or int8, not {options.precision!r}")
    out = options.out
    if out.exists() and not out.is_dir():
        raise ToolError(f"--out {out}: exists and is not a directory")
    if out.exists() and any(out.iterdir()) and not options.force:
        raise ToolError(f"--out {out}: directory is not empty (pass --force to overwrite)")
    return spec


def export_bundle(options: ExportOptions) -> ExportReport:
    """Export, check against PyTorch, quantize if asked, write the manifest last."""
    spec = validate(options)
    from .checkpoint import file_tokenizer, load_checkpoint

    timings: dict[str, float] = {}
    started = time.perf_counter()
    if options.check_memory:
        preflight(spec, options.precision)
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST_FILE).unlink(missing_ok=True)

    log(f"loading {spec.source} with transformers")
    began = time.perf_counter()
    checkpoint = load_checkpoint(spec)
    timings["load_s"] = time.perf_counter() - began
    if checkpoint.max_positions < MAX_LENGTH:
        raise ToolError(
            f"{spec.source}: the text tower has {checkpoint.max_positions} positions, fewer "
            f"than the contract's {MAX_LENGTH}"
        )

    tokenizer_path = out / TOKENIZER_FILE
    write_contract_tokenizer(checkpoint, tokenizer_path, lowercase=options.lowercase)
    merges = prune_merges(tokenizer_path) if options.prune_merges else None

    # PyTorch's side of every check, computed now: the tower is then handed to the ONNX
    # export and freed, so that no PyTorch model is held beside the ONNX graphs (memory.py).
    log("computing PyTorch's reference vectors")
    began = time.perf_counter()
    contract = _contract_fields(options, spec, checkpoint)
    reference = file_tokenizer(checkpoint)
    pytorch = checkpoint_reference(
        _bundle_tokenizer(tokenizer_path, merges),
        checkpoint,
        lowercase=options.lowercase,
        reference=reference,
    )
    loaded_tokenizer = describe_checkpoint_tokenizer(
        checkpoint, lowercase=options.lowercase, reference=reference
    )
    if loaded_tokenizer.get("note"):
        log(f"NOTE: {loaded_tokenizer['note']}")
    timings["check_s"] = time.perf_counter() - began

    # The token table's shape, for the memory the bundle needs in Lambda (sizing.py).
    table_shape = (checkpoint.embedding_rows, int(checkpoint.tower.config.hidden_size))
    onnx_path = out / ONNX_FILE
    scratch = Path(tempfile.mkdtemp(prefix=".fp32-", dir=out))
    try:
        fp32_path = onnx_path if options.precision == "fp32" else scratch / ONNX_FILE
        log(f"exporting the text tower to ONNX (opset {options.opset})")
        began = time.perf_counter()
        graph_options: dict[str, Any] = {
            "max_length": MAX_LENGTH,
            "opset": options.opset,
            "external_data": options.external_data,
            "fuse": options.fuse,
        }
        if options.precision == "int8" and _weight_bytes(checkpoint.tower) > CHILD_PROCESS_BYTES:
            # Traced in a child process that loads the tower again (tower_graph): what the
            # trace keeps of the weights goes with it instead of sitting under the
            # quantizer's copies (so400m: 7.8 GB at peak instead of 8.7). fp32 has no such
            # step: its peak is the trace itself, lower in this process (7.3 GB) than in a
            # child beside it (7.6). This process's copy goes first, and the two tokenizers
            # transformers and tokenizers built (Gemma's: 256k entries each), which nothing
            # after this step reads.
            checkpoint.release_tower()
            checkpoint.tokenizer = None
            del reference
            release_memory()
            graph = build_graph_in_child(spec, fp32_path, **graph_options)
        else:
            graph = build_graph(checkpoint.release_tower(), fp32_path, **graph_options)
        timings["onnx_export_s"] = time.perf_counter() - began

        base = contract.model_copy(update={"graph": graph})
        # What is served: the optimized graph, loaded as the server will load it.
        final = (
            base.model_copy(update={"graph_optimization": OFFLINE_OPTIMIZATION})
            if options.optimize
            else base
        )
        if options.precision == "fp32" and options.optimize:
            began = time.perf_counter()
            optimize_graph(fp32_path, external_data=options.external_data)
            release_memory()
            timings["optimize_s"] = time.perf_counter() - began
        log("checking the fp32 graph (load_service, as serve) against PyTorch")
        began = time.perf_counter()
        fp32_fields = final if options.precision == "fp32" else base
        fp32_service = _check_service(fp32_fields, fp32_path, tokenizer_path, options.threads)
        check = check_against_checkpoint(fp32_service, pytorch, min_cosine=options.min_cosine)
        reference = probe_reference(fp32_service)
        timings["check_s"] += time.perf_counter() - began

        quantization: dict[str, Any] | None = None
        fidelity: dict[str, Any] | None = None
        if options.precision == "int8":
            from .quantize import quantize_int8

            began = time.perf_counter()
            fp32_vectors = fp32_fidelity_vectors(
                fp32_service, corpus_size=options.fidelity_corpus, queries=options.fidelity_queries
            )
            # The fp32 session is closed while quantizing: its vectors are all int8 needs.
            del fp32_service
            release_memory()
            timings["fidelity_s"] = time.perf_counter() - began
            log("quantizing to int8 (MatMul weights per column, token table per row)")
            began = time.perf_counter()
            quantization = quantize_int8(
                fp32_path,
                onnx_path,
                external_data=options.external_data,
                per_channel=options.per_channel,
                weight_form=options.int8_weight_form,  # type: ignore[arg-type]
            ).as_dict()
            release_memory()
            timings["quantize_s"] = time.perf_counter() - began
            if options.optimize:
                began = time.perf_counter()
                optimize_graph(onnx_path, external_data=options.external_data)
                release_memory()
                timings["optimize_s"] = time.perf_counter() - began
            began = time.perf_counter()
            int8_service = _check_service(final, onnx_path, tokenizer_path, options.threads)
            log("measuring int8 fidelity against fp32 (cosine, top-10 overlap)")
            fidelity = measure_int8_fidelity(int8_service, fp32_vectors)
            timings["fidelity_s"] += time.perf_counter() - began
            fidelity["fp32_vs_pytorch"] = check["vs_pytorch"]
            check = check_against_checkpoint(int8_service, pytorch, min_cosine=None)
            if fidelity["cosine"]["cosine_min"] < options.int8_min_cosine:
                raise ExportCheckFailed(
                    f"int8 graph vs fp32: lowest cosine {fidelity['cosine']['cosine_min']:.6f} "
                    f"is below {options.int8_min_cosine} (--int8-min-cosine)"
                )
            self_check = record_self_check(int8_service, reference)
            del int8_service
        else:
            self_check = record_self_check(fp32_service, reference)
            del fp32_service
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    timings["total_s"] = time.perf_counter() - started
    manifest = final.model_copy(
        update={
            **provenance(options, spec, checkpoint),
            "export_check": check,
            "checkpoint_tokenizer": loaded_tokenizer,
            "quantization": quantization,
            "fidelity": fidelity,
            "self_check": self_check,
            "tokenizer_merges": merges,
            # A reproducible build (SOURCE_DATE_EPOCH set, as the demo's) records no duration.
            "export_seconds": None if _source_date() else round(timings["total_s"], 1),
            "files": file_entries(out),
        }
    )
    manifest = manifest.model_copy(
        update={"memory": bundle_memory_need(manifest, table_shape, options.precision)}
    )
    # Validated as the runtime will read it, then written last: no manifest, no bundle.
    manifest = Manifest.model_validate(manifest.model_dump())
    (out / MANIFEST_FILE).write_text(manifest.to_json())
    return ExportReport(out=out, manifest=manifest, timings=timings)


def preflight(spec: Any, precision: Precision) -> None:
    """State what the export will need in memory (from the checkpoint's config: its text
    tower's parameter count) and refuse, before any weight is read, when the machine has
    clearly less (memory.check_memory: available memory plus free swap)."""
    from .checkpoint import read_config

    config, _ = read_config(spec)
    if config is None:
        return
    parameters = text_tower_parameters(config)
    need = export_memory_need(parameters)
    machine = machine_memory()
    log(
        f"text tower: {parameters / 1e6:.0f} M parameters; the {precision} export needs about "
        f"{need / 1e9:.1f} GB of memory"
        + (f" ({machine.available / 1e9:.1f} GB available)" if machine.available else "")
    )
    warning = check_memory(need, machine)
    if warning:
        log(f"WARNING: {warning}")


def write_contract_tokenizer(checkpoint: Any, path: Path, *, lowercase: Lowercase) -> None:
    """The checkpoint's own ``tokenizer.json`` (a copy) with the contract written in.

    Made from the file the checkpoint ships (``checkpoint.file_tokenizer``), not from the
    tokenizer transformers built from it: transformers may add tokens when it loads one
    (transformers 5's GemmaTokenizer adds ``<mask>`` to a vocabulary without it), and the
    export never adds tokens. Every id of the tokenizer must have a row in the tower's
    embedding table (``tokenizer.check_vocabulary``).
    """
    from .checkpoint import file_tokenizer

    tokenizer = file_tokenizer(checkpoint)
    check_vocabulary(tokenizer, rows=checkpoint.embedding_rows)
    try:
        apply_contract(tokenizer, lowercase=lowercase, max_length=MAX_LENGTH)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    tokenizer.save(str(path))


def prune_merges(path: Path) -> TokenizerMerges | None:
    """Prune ``tokenizer.json``'s unreachable merges and entries in place; None when none
    could go."""
    from .tokenizer_merges import prune_tokenizer_file

    result = prune_tokenizer_file(path)
    if not result.changed:
        log(f"tokenizer merges: all {result.merges_before} kept ({result.reason})")
        return None
    log(
        f"tokenizer: {result.merges_after} of {result.merges_before} merges and "
        f"{result.entries_after} of {result.entries_before} entries kept ({result.reason})"
    )
    return TokenizerMerges(
        before=result.merges_before,
        after=result.merges_after,
        rule=result.reason,
        entries_before=result.entries_before,
        entries_after=result.entries_after,
        token_ids=result.token_ids,
    )


def _weight_bytes(tower: Any) -> int:
    return sum(p.numel() * p.element_size() for p in tower.parameters())


def _contract_fields(options: ExportOptions, spec: Any, checkpoint: Any) -> Manifest:
    import torch

    with torch.inference_mode():
        probe = checkpoint.tower(input_ids=torch.zeros((1, MAX_LENGTH), dtype=torch.long))
    return Manifest(
        repository=options.repository or spec.source,
        revision=spec.revision.lower(),
        embedding_dimension=int(probe.pooler_output.shape[-1]),
        text_max_token_length=MAX_LENGTH,
    )


def _bundle_tokenizer(path: Path, merges: TokenizerMerges | None) -> SiglipTokenizer:
    """The bundle's tokenizer as the service loads it (loading.ServiceLoad)."""
    return SiglipTokenizer.from_file(
        path, max_length=MAX_LENGTH, token_ids=merges.token_ids if merges is not None else None
    )


def _check_service(
    manifest: Manifest, onnx_path: Path, tokenizer_path: Path, threads: int | None
) -> EmbeddingService:
    """The files as the runtime loads them (`build_service`, probe included), before any
    manifest file exists; no SIGLIP_* variable applies."""
    session = SessionConfig(
        intra_op_threads=threads or available_cpus(),
        max_batch_size=32,
        graph_optimization=graph_optimization_level("auto", manifest),
    )
    paths = BundlePaths(onnx_path.parent / MANIFEST_FILE, onnx_path, tokenizer_path)
    return build_service(manifest, paths, session)


def provenance(options: ExportOptions, spec: Any, checkpoint: Any) -> dict[str, Any]:
    import onnx
    import onnxruntime
    import tokenizers
    import torch
    import transformers

    from ... import __version__

    record: dict[str, Any] = {
        "source": spec.source
        if spec.kind == "hub"
        else f"local directory ({Path(spec.source).name})",
        "source_kind": spec.kind,
        "model_type": checkpoint.model_type,
        "architecture": checkpoint.architecture,
        "precision": options.precision,
        "opset": options.opset,
        "lowercase": options.lowercase,
        "output": "text_embeds: pooled output after the head, not normalized",
        "exported_at": (_source_date() or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "libraries": {
            "siglip_text": __version__,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__,
            "tokenizers": tokenizers.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
    }
    if checkpoint.logit_scale is not None:
        record["logit_scale"] = checkpoint.logit_scale
        record["logit_bias"] = checkpoint.logit_bias
        record["probability"] = "sigmoid(cosine * exp(logit_scale) + logit_bias)"
    return record


def _source_date() -> datetime | None:
    """The build time of a reproducible build (reproducible-builds.org's SOURCE_DATE_EPOCH)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    return datetime.fromtimestamp(int(epoch), UTC) if epoch.isdigit() else None


def bundle_memory_need(
    manifest: Manifest, table_shape: tuple[int, int], precision: Precision
) -> MemoryNeed:
    """What the bundle needs resident in Lambda, from its model files' sizes and its token
    table (fp32: 4 bytes a number; int8: 1, plus a float32 scale a row)."""
    rows, width = table_shape
    table = rows * width * 4 if precision == "fp32" else rows * width + rows * 4
    model = sum(entry.size or 0 for name, entry in manifest.files.items() if name != TOKENIZER_FILE)
    return memory_need(model_bytes=model, table_bytes=table, precision=precision)


def file_entries(out: Path) -> dict[str, FileEntry]:
    """sha256 and size of every artifact (the ONNX weights file too, when there is one)."""
    names = [ONNX_FILE, TOKENIZER_FILE]
    if external_data_path(out / ONNX_FILE).exists():
        names.insert(1, external_data_path(out / ONNX_FILE).name)
    return {
        name: FileEntry(sha256=sha256_file(out / name), size=(out / name).stat().st_size)
        for name in names
    }
