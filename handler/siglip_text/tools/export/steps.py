"""The export's steps: each reads what earlier steps left in the `ExportState` and leaves
what it makes there. pipeline.py runs them in order, timing each and releasing memory
after each; `FP32_STEPS` and `INT8_STEPS` are the two precisions' lists.

The order keeps one large thing in memory at a time (memory.py): PyTorch's reference
vectors are computed before the tower is handed to the ONNX export, the fp32 vectors int8
is measured against before the fp32 session is closed for quantizing.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from ...aws.sizing import memory_need
from ...engine.bundle import (
    MANIFEST_FILE,
    ONNX_FILE,
    TOKENIZER_FILE,
    BundlePaths,
    ExportCheck,
    FileEntry,
    Libraries,
    Manifest,
    MemoryNeed,
    TokenizerMerges,
    sha256_file,
)
from ...engine.cpu import usable_cpus
from ...engine.encoder import SessionConfig
from ...engine.fingerprint import fingerprint as contract_fingerprint
from ...engine.loading import ServiceInit, graph_optimization_level
from ...engine.service import EmbeddingService
from ...engine.tokenization import SiglipTokenizer
from ..checkpoint_fingerprint import checkpoint_contract
from ..exit_status import ToolError
from ..texts import EDGE_CASE_TEXTS, MAX_LENGTH
from .checkpoint import checkpoint_directory, contract_token_ids, file_tokenizer, load_checkpoint
from .checkpoint_tokenizer import describe_checkpoint_tokenizer
from .checks import (
    ExportCheckFailed,
    check_against_checkpoint,
    checkpoint_reference,
    fp32_fidelity_vectors,
    measure_int8_fidelity,
    probe_reference,
    record_self_check,
)
from .memory import release_memory
from .onnx_export import external_data_path
from .ort_optimize import optimize_graph
from .state import ExportState, log
from .tokenizer import apply_contract, check_vocabulary, contract_tokens
from .tower_graph import CHILD_PROCESS_BYTES, build_graph, build_graph_in_child


class Step(NamedTuple):
    """One step (a function of this module, named for what it makes), the timing
    (``ExportReport.timings``) its seconds add to, and whether the export returns freed
    memory to the system after it: only after the steps that drop something large (a full
    collection with torch loaded takes a quarter of a second, so not after every step)."""

    run: Callable[[ExportState], None]
    timing: str
    release: bool = False


def load(state: ExportState) -> None:
    """The checkpoint, with transformers."""
    log(f"loading {state.spec.source} with transformers")
    checkpoint = load_checkpoint(state.spec)
    if checkpoint.max_positions < MAX_LENGTH:
        raise ToolError(
            f"{state.spec.source}: the text tower has {checkpoint.max_positions} positions, "
            f"fewer than the contract's {MAX_LENGTH}"
        )
    state.checkpoint = checkpoint


def tokenizer(state: ExportState) -> None:
    """The bundle's ``tokenizer.json``: the checkpoint's own file (parsed once, here) with
    the contract written in, its unreachable merges pruned.

    Made from the file the checkpoint ships (``checkpoint.file_tokenizer``), not from the
    tokenizer transformers built from it: transformers may add tokens when it loads one
    (transformers 5's GemmaTokenizer adds ``<mask>`` to a vocabulary without it), and the
    export never adds tokens. Every id of the tokenizer must have a row in the tower's
    embedding table (``tokenizer.check_vocabulary``). What the contract's ids and what
    transformers makes of the tokenizer are taken from the file as shipped, before the
    contract is written into it.
    """
    checkpoint = state.require_checkpoint()
    lowercase = state.options.lowercase
    source = file_tokenizer(checkpoint)
    check_vocabulary(source, rows=checkpoint.embedding_rows)
    try:
        contract_tokens(source)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    state.contract_ids = contract_token_ids(
        source, EDGE_CASE_TEXTS, lowercase=lowercase, max_length=MAX_LENGTH
    )
    state.checkpoint_tokenizer = describe_checkpoint_tokenizer(
        checkpoint.tokenizer, source, state.contract_ids, lowercase=lowercase
    )
    if state.checkpoint_tokenizer.note:
        log(f"NOTE: {state.checkpoint_tokenizer.note}")
    try:
        apply_contract(source, lowercase=lowercase, max_length=MAX_LENGTH)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    source.save(str(state.tokenizer_path))
    if state.options.prune_merges:
        state.merges = prune_merges(state.tokenizer_path)
    # Nothing after this step reads either tokenizer (Gemma's: 256k entries each).
    checkpoint.tokenizer = None


def reference(state: ExportState) -> None:
    """PyTorch's side of every check, computed now: the tower is then handed to the ONNX
    export and freed, so that no PyTorch model is held beside the ONNX graphs (memory.py)."""
    import torch

    log("computing PyTorch's reference vectors")
    checkpoint = state.require_checkpoint()
    with torch.inference_mode():
        probe = checkpoint.tower(input_ids=torch.zeros((1, MAX_LENGTH), dtype=torch.long))
    state.contract = Manifest(
        repository=state.options.repository or state.spec.source,
        revision=(state.spec.revision or "").lower(),
        embedding_dimension=int(probe.pooler_output.shape[-1]),
        text_max_token_length=MAX_LENGTH,
    )
    pruned = state.merges
    bundle_tokenizer = SiglipTokenizer.from_file(
        state.tokenizer_path,
        max_length=MAX_LENGTH,
        token_ids=pruned.token_ids if pruned is not None else None,
    )
    state.pytorch = checkpoint_reference(
        bundle_tokenizer, checkpoint.tower, state.contract_ids, lowercase=state.options.lowercase
    )
    state.table_shape = (checkpoint.embedding_rows, int(checkpoint.tower.config.hidden_size))


def fingerprint(state: ExportState) -> None:
    """The contract fingerprint, from the checkpoint's files as the index side computes it
    (tools/checkpoint_fingerprint.py): the same for every precision. Recorded with the contract
    fields, so that the checks below load the bundle with the contract check init runs."""
    if state.contract is None:
        raise RuntimeError("the reference step has not run")
    options = state.options
    try:
        contract = checkpoint_contract(
            checkpoint_directory(state.spec),
            repository=state.contract.repository,
            revision=state.contract.revision,
            lowercase=options.lowercase,
            length=MAX_LENGTH,
        )
    except (ToolError, OSError) as exc:
        # No fingerprint recorded: init then computes one from the files the bundle serves.
        log(f"NOTE: no contract fingerprint from the checkpoint: {exc}")
        return
    if contract.dimension != state.contract.embedding_dimension:
        raise ToolError(
            f"the checkpoint's text head is {contract.dimension} wide, but the tower's pooled "
            f"output has {state.contract.embedding_dimension} dimensions"
        )
    value = contract_fingerprint(contract)
    log(f"contract fingerprint {value}")
    state.contract = state.contract.model_copy(update={"contract": contract, "fingerprint": value})


def graph(state: ExportState) -> None:
    """The fp32 graph (tower_graph.py), at the bundle's path for fp32, in scratch for int8.

    An int8 export of a large tower traces it in a child process that loads the tower again
    (tower_graph.build_graph_in_child): what the trace keeps of the weights goes with the
    child instead of sitting under the quantizer's copies. fp32 has no such step: its peak
    is the trace itself, lower in this process than in a child beside it (docs/sizes.md).
    """
    options = state.options
    checkpoint = state.require_checkpoint()
    log(f"exporting the text tower to ONNX (opset {options.opset})")
    graph_options: dict[str, Any] = {
        "max_length": MAX_LENGTH,
        "opset": options.opset,
        "external_data": options.external_data,
        "fuse": options.fuse,
    }
    if options.precision == "int8" and _weight_bytes(checkpoint.tower) > CHILD_PROCESS_BYTES:
        checkpoint.release_tower()
        release_memory()
        state.graph = build_graph_in_child(state.spec, state.fp32_path, **graph_options)
    else:
        # handed over, not held here: build_graph frees it once traced
        state.graph = build_graph(checkpoint.release_tower(), state.fp32_path, **graph_options)


def optimize(state: ExportState) -> None:
    """ONNX Runtime's offline optimizations on the graph the bundle serves."""
    if state.options.optimize:
        path = state.fp32_path if state.options.precision == "fp32" else state.onnx_path
        optimize_graph(path, external_data=state.options.external_data)


def check_fp32(state: ExportState) -> None:
    """The fp32 graph loaded as the server loads it, against PyTorch; the probe text's
    vector, which the self-check records."""
    log("checking the fp32 graph (load_service, as serve) against PyTorch")
    served = state.options.precision == "fp32"
    state.fp32 = _check_service(state, state.fields(served=served), state.fp32_path)
    state.check = _checked(state, state.fp32, min_cosine=state.options.min_cosine)
    state.probe = probe_reference(state.fp32)


def fp32_vectors(state: ExportState) -> None:
    """int8: the fp32 vectors it is measured against; the fp32 session is then closed, its
    vectors being all int8 needs of it."""
    if state.fp32 is None:
        raise RuntimeError("the check_fp32 step has not run")
    state.fp32_vectors = fp32_fidelity_vectors(
        state.fp32,
        corpus_size=state.options.fidelity_corpus,
        queries=state.options.fidelity_queries,
    )
    state.fp32 = None


def quantize(state: ExportState) -> None:
    """int8: MatMul weights per column, the token table per row (quantize.py)."""
    from .quantize import quantize_int8

    log("quantizing to int8 (MatMul weights per column, token table per row)")
    state.quantization = quantize_int8(
        state.fp32_path,
        state.onnx_path,
        external_data=state.options.external_data,
        per_channel=state.options.per_channel,
        weight_form=state.options.int8_weight_form,
    ).record()


def check_int8(state: ExportState) -> None:
    """int8 against fp32 (cosine, top-10 overlap) and against PyTorch."""
    if state.fp32_vectors is None or state.check is None:
        raise RuntimeError("the fp32_vectors step has not run")
    state.int8 = _check_service(state, state.fields(served=True), state.onnx_path)
    log("measuring int8 fidelity against fp32 (cosine, top-10 overlap)")
    fidelity = measure_int8_fidelity(
        state.int8, state.fp32_vectors, fp32_vs_pytorch=state.check.vs_pytorch
    )
    state.fidelity = fidelity
    state.check = _checked(state, state.int8, min_cosine=None)
    if fidelity.cosine.cosine_min < state.options.int8_min_cosine:
        raise ExportCheckFailed(
            f"int8 graph vs fp32: lowest cosine {fidelity.cosine.cosine_min:.6f} "
            f"is below {state.options.int8_min_cosine} (--int8-min-cosine)"
        )


def self_check(state: ExportState) -> None:
    """What init holds the served graph to on its CPU (self_check.py); closes its session."""
    served = state.int8 if state.options.precision == "int8" else state.fp32
    if served is None or state.probe is None:
        raise RuntimeError("the check steps have not run")
    state.self_check = record_self_check(served, state.probe)
    state.fp32 = state.int8 = None


FP32_STEPS = (
    Step(load, "load_s"),
    Step(tokenizer, "tokenizer_s"),
    Step(reference, "check_s"),
    Step(fingerprint, "fingerprint_s"),
    Step(graph, "onnx_export_s"),
    Step(optimize, "optimize_s", release=True),
    Step(check_fp32, "check_s"),
    Step(self_check, "check_s"),
)
INT8_STEPS = (
    Step(load, "load_s"),
    Step(tokenizer, "tokenizer_s"),
    Step(reference, "check_s"),
    Step(fingerprint, "fingerprint_s"),
    Step(graph, "onnx_export_s"),
    Step(check_fp32, "check_s"),
    Step(fp32_vectors, "fidelity_s", release=True),
    Step(quantize, "quantize_s", release=True),
    Step(optimize, "optimize_s", release=True),
    Step(check_int8, "fidelity_s"),
    Step(self_check, "check_s"),
)


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


def manifest(state: ExportState, total_s: float) -> Manifest:
    """Every field the steps recorded, the provenance and the files; validated as the runtime
    will read it."""
    checkpoint = state.require_checkpoint()
    spec, options = state.spec, state.options
    recorded = state.fields(served=True).model_copy(
        update={
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
            "libraries": libraries(),
            **(
                {
                    "logit_scale": checkpoint.logit_scale,
                    "logit_bias": checkpoint.logit_bias,
                    "probability": "sigmoid(cosine * exp(logit_scale) + logit_bias)",
                }
                if checkpoint.logit_scale is not None
                else {}
            ),
            "export_check": state.check,
            "checkpoint_tokenizer": state.checkpoint_tokenizer,
            "quantization": state.quantization,
            "fidelity": state.fidelity,
            "self_check": state.self_check,
            "tokenizer_merges": state.merges,
            # A reproducible build (SOURCE_DATE_EPOCH set, as the demo's) records no duration.
            "export_seconds": None if _source_date() else round(total_s, 1),
            "files": file_entries(state.out),
        }
    )
    recorded = recorded.model_copy(update={"memory": bundle_memory_need(recorded, state)})
    return Manifest.model_validate(recorded.model_dump(by_alias=True))


def libraries() -> Libraries:
    import numpy as np
    import onnx
    import onnxruntime
    import tokenizers
    import torch
    import transformers

    from ... import __version__

    return Libraries(
        siglip_text=__version__,
        transformers=transformers.__version__,
        torch=torch.__version__,
        onnx=onnx.__version__,
        onnxruntime=onnxruntime.__version__,
        tokenizers=tokenizers.__version__,
        numpy=np.__version__,
        python=platform.python_version(),
    )


def bundle_memory_need(manifest: Manifest, state: ExportState) -> MemoryNeed:
    """What the bundle needs resident in Lambda, from its model files' sizes and its token
    table (fp32: 4 bytes a number; int8: 1, plus a float32 scale a row)."""
    rows, width = state.table_shape
    precision = state.options.precision
    table = rows * width * 4 if precision == "fp32" else rows * width + rows * 4
    model = sum(entry.size or 0 for name, entry in manifest.files.items() if name != TOKENIZER_FILE)
    return memory_need(model_bytes=model, table_bytes=table, precision=precision)


def file_entries(out: Path) -> dict[str, FileEntry]:
    """sha256 and size of every artifact (the ONNX weights file too, when there is one)."""
    onnx_path = out / ONNX_FILE
    names = [ONNX_FILE, TOKENIZER_FILE]
    if external_data_path(onnx_path).exists():
        names.insert(1, external_data_path(onnx_path).name)
    return {
        name: FileEntry(sha256=sha256_file(out / name), size=(out / name).stat().st_size)
        for name in names
    }


def _checked(
    state: ExportState, service: EmbeddingService, *, min_cosine: float | None
) -> ExportCheck:
    if state.pytorch is None:
        raise RuntimeError("the reference step has not run")
    check = check_against_checkpoint(service, state.pytorch, min_cosine=min_cosine)
    stats = check.vs_pytorch
    log(
        f"vs PyTorch on {stats.count} texts: cosine min {stats.cosine_min:.7f} mean "
        f"{stats.cosine_mean:.7f}, max abs error {stats.max_abs_error:.2e}; tokenizer "
        f"mismatches {len(state.pytorch.mismatches)}"
    )
    return check


def _check_service(state: ExportState, fields: Manifest, onnx_path: Path) -> EmbeddingService:
    """The files as the runtime loads them (`ServiceInit`, probe included), before any
    manifest file exists; no SIGLIP_* variable applies."""
    session = SessionConfig(
        intra_op_threads=state.options.threads or usable_cpus(),
        max_batch_size=32,
        graph_optimization=graph_optimization_level("auto", fields),
    )
    paths = BundlePaths(onnx_path.parent / MANIFEST_FILE, onnx_path, state.tokenizer_path)
    return ServiceInit.start_bundle(fields, paths, session).service()


def _weight_bytes(tower: Any) -> int:
    return sum(p.numel() * p.element_size() for p in tower.parameters())


def _source_date() -> datetime | None:
    """The build time of a reproducible build (reproducible-builds.org's SOURCE_DATE_EPOCH)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    return datetime.fromtimestamp(int(epoch), UTC) if epoch.isdigit() else None
