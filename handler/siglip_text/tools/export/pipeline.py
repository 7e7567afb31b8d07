"""The export pipeline: a SigLIP / SigLIP 2 checkpoint -> a checked bundle. Export extra.

Writes ``text_model.onnx`` (``input_ids [batch, 64]`` -> ``text_embeds``, the pooled output,
not normalized; weights in ``text_model.onnx.data`` past protobuf's 2 GB), ``tokenizer.json``
(the checkpoint's tokenizer with the contract's lowercasing, EOS and padding written in) and
``manifest.json``. Before the manifest is written, the bundle is loaded with
``ServiceInit`` (the init phase ``serve`` and Lambda run) and compared with the contract's
ids and PyTorch (checks.py); what the installed transformers makes of the checkpoint's
tokenizer, where it departs from the contract, is recorded (``checkpoint_tokenizer``). An
fp32 graph below cosine 0.99999 fails the export and leaves no manifest, so the directory
cannot be served. The command line is command.py, the summary report.py.

`export_bundle` runs the precision's list of named steps (steps.py) over one typed state
(state.py): each step timed under its name's timing, memory released after each, the
manifest assembled and written last.

Last, beside the bundle directory and outside it, ``<directory>.sha256`` (`manifest_pin`):
the manifest's own sha256 in ``sha256sum`` format, the pin the image build checks the bundle
against (scripts/check_bundle_files.py; docs/export.md).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...engine.bundle import MANIFEST_FILE, Manifest, Precision, sha256_file
from ..exit_status import ToolError
from .checkpoint import SourceSpec, read_config, resolve_source
from .memory import (
    check_memory,
    export_memory_need,
    machine_memory,
    release_memory,
    text_tower_parameters,
)
from .revision import hub_revision
from .state import ExportOptions, ExportState, log
from .steps import FP32_STEPS, INT8_STEPS, manifest

__all__ = ["ExportOptions", "ExportReport", "export_bundle", "manifest_pin"]


@dataclass
class ExportReport:
    out: Path
    manifest: Manifest
    timings: dict[str, float] = field(default_factory=dict)


def export_bundle(options: ExportOptions) -> ExportReport:
    """Export, check against PyTorch, quantize if asked, write the manifest last."""
    spec = validate(options)
    started = time.perf_counter()
    if options.check_memory:
        preflight(spec, options.precision)
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST_FILE).unlink(missing_ok=True)
    manifest_pin(out).unlink(missing_ok=True)
    state = ExportState(options, spec, scratch=Path(tempfile.mkdtemp(prefix=".fp32-", dir=out)))
    timings: dict[str, float] = {}
    steps = FP32_STEPS if options.precision == "fp32" else INT8_STEPS
    try:
        for number, step in enumerate(steps, start=1):
            # A line before and after each step: the ONNX export alone takes minutes on a
            # large tower, and a silent terminal looks hung.
            name = f"step {number}/{len(steps)} {step.run.__name__}"
            log(f"{name}: started ({time.perf_counter() - started:.0f} s in)")
            began = time.perf_counter()
            step.run(state)
            if step.release:
                release_memory()
            took = time.perf_counter() - began
            timings[step.timing] = timings.get(step.timing, 0.0) + took
            log(f"{name}: done in {took:.1f} s")
    finally:
        shutil.rmtree(state.scratch, ignore_errors=True)
    timings["total_s"] = time.perf_counter() - started
    written = manifest(state, timings["total_s"])
    # Validated as the runtime will read it, then written last: no manifest, no bundle.
    (out / MANIFEST_FILE).write_text(written.to_json())
    manifest_pin(out).write_text(f"{sha256_file(out / MANIFEST_FILE)}  {MANIFEST_FILE}\n")
    return ExportReport(out=out, manifest=written, timings=timings)


def manifest_pin(out: Path) -> Path:
    """Where the manifest's sha256 is pinned: beside the bundle directory, outside it
    (``layers/model`` -> ``layers/model.sha256``), where the deploy keeps it."""
    out = out.resolve()
    return out.with_name(out.name + ".sha256")


def validate(options: ExportOptions) -> SourceSpec:
    """Fail closed before loading anything: SHA revision, repository, output directory.

    A Hub id's branch or tag is resolved here, once, to the commit SHA the manifest pins."""
    revision = hub_revision(options.source, options.revision)
    if revision != options.revision:
        log(f"--revision {options.revision} of {options.source} is commit {revision}")
    spec = resolve_source(options.source, revision=revision, require_revision=True)
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


def preflight(spec: SourceSpec, precision: Precision) -> None:
    """State what the export will need in memory (from the checkpoint's config: its text
    tower's parameter count) and refuse, before any weight is read, when the machine has
    clearly less (memory.check_memory: available memory plus free swap)."""
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
