"""What an export needs in memory, and letting go of what it no longer holds.

The export holds one large thing at a time: the PyTorch tower until it is traced (its
reference vectors are computed first, checks.checkpoint_reference), then the ONNX graph
being written, fused, optimized or quantized, then the ONNX Runtime session that checks
it. `release_memory` hands what a step freed back to the system before the next one starts.

`export_memory_need` is the pre-flight figure: measured peaks (``benchmarks/export_memory.py``,
docs/sizes.md) scale with the tower's fp32 size, so the need is stated from the checkpoint's
config (its parameter count) before any weight is read, and `check_memory` refuses when the
machine clearly has less.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..exit_status import ToolError

#: Peak resident memory of an export per byte of the text tower's fp32 weights, plus a
#: fixed part (the interpreter, torch, transformers, ONNX Runtime, the tokenizer), with a
#: margin over the peaks docs/sizes.md records (python -m benchmarks.export_memory: the
#: summed RSS of the export and its child). A tower over 2 GB peaks while its child process
#: traces it, int8 included, since ONNX Runtime's quantizer is given every weight but the
#: token table; a tower under 2 GB peaks in ``torch.onnx.export``, which then builds the
#: whole graph in memory: hence a larger factor below 2 GB.
PEAK_PER_WEIGHT_BYTE = 2.6
PEAK_PER_WEIGHT_BYTE_UNDER_2GB = 4.3
FIXED_BYTES = 1_200_000_000
PROTOBUF_LIMIT = 2 * 1024**3

MEMINFO = Path("/proc/meminfo")


def release_memory() -> None:
    """Collect garbage and return freed heap pages to the system (glibc's ``malloc_trim``),
    so that the next step's peak does not sit on top of the last one's leftovers."""
    gc.collect()
    if sys.platform.startswith("linux"):
        # not glibc (musl): nothing to trim
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)


def text_tower_parameters(config: Any) -> int:
    """Parameters of a SigLIP / SigLIP 2 text tower from its transformers config (the
    ``text_config`` of a full model, or a text model's own config): embeddings, layers,
    final LayerNorm and head."""
    text = getattr(config, "text_config", None) or config
    hidden = int(text.hidden_size)
    mlp = int(text.intermediate_size)
    vocab = int(text.vocab_size)
    positions = int(text.max_position_embeddings)
    head = int(getattr(text, "projection_size", None) or hidden)
    per_layer = 4 * (hidden * hidden + hidden) + 2 * hidden * mlp + mlp + hidden + 4 * hidden
    return (
        (vocab + positions) * hidden
        + int(text.num_hidden_layers) * per_layer
        + 2 * hidden
        + hidden * head
        + head
    )


def export_memory_need(parameters: int) -> int:
    """Bytes of memory an export (fp32 or int8: the same peak) of a text tower with
    ``parameters`` fp32 weights needs."""
    weights = 4 * parameters
    per_byte = PEAK_PER_WEIGHT_BYTE if weights >= PROTOBUF_LIMIT else PEAK_PER_WEIGHT_BYTE_UNDER_2GB
    return int(per_byte * weights) + FIXED_BYTES


@dataclass(frozen=True)
class MachineMemory:
    """What the machine can give an export now: ``available`` (Linux MemAvailable: free
    plus reclaimable page cache) and ``swap_free``; None when unknown."""

    available: int | None
    swap_free: int | None

    @property
    def usable(self) -> int | None:
        if self.available is None:
            return None
        return self.available + (self.swap_free or 0)


def machine_memory(meminfo: Path | None = None) -> MachineMemory:
    """MemAvailable and SwapFree from ``/proc/meminfo``; elsewhere the physical memory
    (``sysconf``), no swap; None when neither can be read."""
    try:
        fields = {
            line.split(":")[0]: int(line.split()[1]) * 1024
            for line in (meminfo or MEMINFO).read_text().splitlines()
            if line.split()[1:2] and line.split()[1].isdigit()
        }
        if "MemAvailable" in fields:
            return MachineMemory(fields["MemAvailable"], fields.get("SwapFree", 0))
    except OSError:
        pass
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return MachineMemory(None, None)
    return MachineMemory(int(total), None)


def check_memory(need: int, machine: MachineMemory) -> str | None:
    """Refuse (ToolError) when the need exceeds memory plus swap; a warning line (to log)
    when it exceeds memory alone (the export will page, slowly); None when it fits."""
    gb = 1e9
    if machine.usable is None:
        return f"export needs about {need / gb:.1f} GB of memory (this machine's is unknown)"
    if need > machine.usable:
        raise ToolError(
            f"export needs about {need / gb:.1f} GB of memory; this machine has "
            f"{(machine.available or 0) / gb:.1f} GB available and "
            f"{(machine.swap_free or 0) / gb:.1f} GB of free swap. Free memory, export on a "
            "larger machine, or pass --skip-memory-check to try anyway"
        )
    if machine.available is not None and need > machine.available:
        return (
            f"export needs about {need / gb:.1f} GB of memory, more than the "
            f"{machine.available / gb:.1f} GB available: it will use swap and run slowly"
        )
    return None
