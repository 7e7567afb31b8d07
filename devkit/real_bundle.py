"""A real-shaped bundle: what ``siglip-text export --precision int8`` writes for a SigLIP 2
checkpoint, at toy width.

The demo bundle is a plain fp32 graph of 32 dimensions with a small vocabulary; a user's
bundle is an int8 export of ``google/siglip2-*``: the graph ONNX Runtime's optimizer fused
and quantized (``QAttention``, ``DynamicQuantizeMatMul``, ``MatMulIntegerToFloat``, a per-row
int8 token table), the real 256,000-entry Gemma tokenizer, 768 dimensions, another model
id. This module makes such a bundle the way a user does: a random ``Siglip2Model`` saved
with ``save_pretrained`` (real architecture and vocabulary, hidden size 16, two layers, a
head of base's width) and the fixture's Gemma tokenizer, exported by the ``siglip-text
export`` command in a subprocess. The bundle is about 11 MB (a third of it the token table);
the export takes about a minute and a half on two busy cores, most of it the tokenizer's
pruning.

Built once per pytest session (`real_bundle`, under the session's base temporary
directory), or once for many sessions: ``SIGLIP_REAL_BUNDLE_DIR=DIR`` keeps it in ``DIR``
and rebuilds it only when the recipe, the export code or the tokenizer changed
(``python -m devkit.real_bundle DIR`` builds it there ahead of a run). Tests skip,
saying why, without the export extra or the Gemma tokenizer (devkit/gemma.py).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from devkit import gemma
from devkit.paths import ROOT
from devkit.tiny_checkpoint import export_argv

ENV = "SIGLIP_REAL_BUNDLE_DIR"
REPOSITORY = "test/siglip2-real-shaped-int8-RANDOM"
REVISION = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed"
SEED = 20261206
HIDDEN = 16
LAYERS = 2
#: The head's width: base's, so the vectors and answers have a real bundle's size.
DIMENSION = 768
#: What the int8 export writes for a SigLIP 2 tower (tests check the graph holds them).
QUANTIZED_OPS = ("DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QAttention")
EXPORT_EXTRA = ("torch", "transformers", "onnx")


@dataclass(frozen=True)
class RealBundle:
    """The exported bundle, the checkpoint it came from, and how long the export took."""

    bundle: Path
    checkpoint: Path
    export_s: float

    @property
    def model_id(self) -> str:
        return REPOSITORY


def missing() -> str | None:
    """Why the bundle cannot be made here, or None."""
    absent = [name for name in EXPORT_EXTRA if importlib.util.find_spec(name) is None]
    if absent:
        return (
            f"needs the export extra ({', '.join(absent)} missing): "
            "pip install torch==2.13.0 -e '.[export]'"
        )
    if gemma.tokenizer_dir() is None:
        return gemma.SKIP_REASON
    return None


def real_bundle(tmp_path_factory: pytest.TempPathFactory) -> RealBundle:
    """The session's real-shaped bundle (skips, saying why, where it cannot be made)."""
    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    configured = os.environ.get(ENV, "").strip()
    home = Path(configured) if configured else tmp_path_factory.getbasetemp() / "real-shaped"
    return build(home)


def recipe_stamp(source: Path) -> str:
    """What the bundle depends on: this recipe, the export code, the tokenizer files."""
    digest = hashlib.sha256(repr((REPOSITORY, REVISION, SEED, HIDDEN, LAYERS, DIMENSION)).encode())
    parts = sorted((ROOT / "handler" / "siglip_text").rglob("*.py"))
    parts += [source / "tokenizer.json", source / "tokenizer_config.json"]
    for path in parts:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def build(home: Path) -> RealBundle:
    """The checkpoint and its int8 bundle in ``home``, made unless already there."""
    source = gemma.tokenizer_dir()
    assert source is not None, gemma.SKIP_REASON
    stamp = recipe_stamp(source)
    record = home / "real-bundle.json"
    if record.is_file():
        known = json.loads(record.read_text())
        if known.get("stamp") == stamp and (home / "bundle" / "manifest.json").is_file():
            return RealBundle(home / "bundle", home / "checkpoint", float(known["export_s"]))
    # Only what this module writes: $SIGLIP_REAL_BUNDLE_DIR may name a directory with more.
    for name in ("checkpoint", "bundle", "bundle-fp32"):
        shutil.rmtree(home / name, ignore_errors=True)
    for name in ("bundle.sha256", "bundle-fp32.sha256", record.name):
        (home / name).unlink(missing_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    checkpoint = write_checkpoint(source, home / "checkpoint")
    export_s = export(checkpoint, home / "bundle", "int8")
    record.write_text(json.dumps({"stamp": stamp, "export_s": export_s}))
    return RealBundle(home / "bundle", checkpoint, export_s)


def fp32_sibling(made: RealBundle) -> Path:
    """The fp32 bundle of the same checkpoint (``siglip-text fidelity``'s ``--fp32``), made
    beside the int8 one on first use."""
    out = made.bundle.with_name("bundle-fp32")
    if not (out / "manifest.json").is_file():
        shutil.rmtree(out, ignore_errors=True)
        export(made.checkpoint, out, "fp32")
    return out


def export(checkpoint: Path, out: Path, precision: str) -> float:
    """``siglip-text export CHECKPOINT --out OUT --precision P`` in a subprocess; seconds."""
    began = time.perf_counter()
    done = subprocess.run(
        [
            *siglip_text_command(),
            *export_argv(checkpoint, out, repository=REPOSITORY, revision=REVISION),
            "--precision",
            precision,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"siglip-text export exited {done.returncode}:\n{done.stdout[-3000:]}\n"
            f"{done.stderr[-3000:]}"
        )
    return time.perf_counter() - began


def siglip_text_command() -> list[str]:
    """The installed ``siglip-text`` script of this interpreter's environment."""
    script = Path(sys.executable).parent / "siglip-text"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from siglip_text.cli import main; raise SystemExit(main())"]


def write_checkpoint(source: Path, directory: Path) -> Path:
    """save_pretrained of a seeded random ``Siglip2Model`` with the 256k vocabulary and the
    fixture's tokenizer in the shape transformers 4 saves (``$A <eos>``)."""
    import torch
    from transformers import Siglip2Model

    from devkit.tiny_checkpoint import perturbed

    torch.manual_seed(SEED)
    config = gemma.siglip2_config(
        hidden=HIDDEN, intermediate=4 * HIDDEN, layers=LAYERS, projection_size=DIMENSION
    )
    directory.mkdir(parents=True, exist_ok=True)
    perturbed(Siglip2Model(config).eval()).save_pretrained(directory)  # type: ignore[no-untyped-call]
    gemma.write_checkpoint_tokenizer(source, directory, shape="eos")
    return directory


def graph_ops(bundle: Path) -> dict[str, int]:
    """The bundle graph's operators and how many of each."""
    import onnx

    model = onnx.load(str(bundle / "text_model.onnx"), load_external_data=False)
    counts: dict[str, int] = {}
    for node in model.graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def main(argv: list[str]) -> int:
    """``python -m devkit.real_bundle DIR``: build (or find) the bundle in DIR."""
    if len(argv) != 1:
        print("usage: python -m devkit.real_bundle DIR", file=sys.stderr)
        return 2
    reason = missing()
    if reason is not None:
        print(reason, file=sys.stderr)
        return 2
    made = build(Path(argv[0]).resolve())
    print(f"{made.bundle} ({made.export_s:.0f} s to export)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
