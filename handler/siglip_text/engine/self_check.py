"""The init's check of this CPU's arithmetic, after the probe (loading.py).

Two checks, both failing closed with a `ModelLoadError` that names the CPU's features:

- `check_int8_kernel`: an int8 bundle whose weights are not declared saturation-free (every
  bundle exported before the 7-bit weight form) on a CPU whose int8 kernel saturates
  (cpu.int8_kernel_product: ONNX Runtime's AVX2 kernel, ``vpmaddubsw``) would serve wrong
  vectors: refused with the cause.
- `check_reference`: a bundle that records its probe's reference vector (manifest
  ``self_check``, the fp32 graph's vector of the probe text at export) must compute a vector
  at least ``min_cosine`` from it on this CPU.

Both are cheap: the kernel check is one 64-element ``MatMulInteger``, the reference check a
dot product of the probe's own vector.
"""

from __future__ import annotations

import numpy as np

from .bundle import Manifest
from .cpu import KERNEL_CHECK_EXACT, cpu_description, int8_kernel_product
from .errors import ModelLoadError
from .json_value import JSONObject

#: export records ``min_cosine`` as the exporting CPU's cosine less this margin: far above
#: the float noise between exact kernels, far below what a saturating kernel does to a
#: vector (docs/cpus.md gives both, measured).
MARGIN = 0.001


def check_int8_kernel(manifest: Manifest) -> None:
    """Refuse a full-range int8 bundle on a CPU whose int8 kernel saturates."""
    if manifest.precision != "int8" or manifest.saturation_free:
        return
    product = int8_kernel_product()
    if product == KERNEL_CHECK_EXACT:
        return
    raise ModelLoadError(
        f"int8 self-check failed on this {cpu_description()}: its int8 kernel computes "
        f"MatMulInteger 255 x 127 over 64 as {product:,}, not {KERNEL_CHECK_EXACT:,} "
        "(ONNX Runtime's AVX2 kernel, vpmaddubsw, saturates each pair of products at "
        "32,767), and this bundle's int8 weights use the full -127..127 range (its manifest "
        "does not declare them saturation-free): its vectors would be wrong here. Re-export "
        "it with this version of siglip-text (7-bit weights, exact on every CPU) or deploy "
        "the fp32 bundle; see docs/cpus.md"
    )


def cosine_to_reference(vector: np.ndarray, reference: np.ndarray) -> float:
    """The cosine of a unit-length ``vector`` to a recorded ``reference``: the one figure
    export records (``measured_cosine``) and init holds to ``min_cosine``."""
    norm = float(np.linalg.norm(reference))
    return float(np.dot(vector.astype(np.float64), reference) / norm) if norm else 0.0


def expected_probe(manifest: Manifest, text: str) -> JSONObject:
    """What a check from outside holds this bundle's vector of ``text`` to, as init does: the
    reference export recorded for that text and its bound (both None when none is recorded).
    The pre-traffic hook reads it from ``GET /health?probe=true``."""
    recorded = manifest.self_check
    if recorded is None or recorded.text != text:
        return {"text": text, "reference": None, "min_cosine": None}
    return {
        "text": text,
        "reference": [float(x) for x in recorded.reference],
        "min_cosine": recorded.min_cosine,
    }


def check_reference(manifest: Manifest, text: str, vector: np.ndarray) -> float | None:
    """The cosine of this CPU's ``vector`` for ``text`` to the recorded reference; raises
    below the bound. None when the bundle records no reference for that text."""
    recorded = manifest.self_check
    if recorded is None or recorded.text != text:
        return None
    reference = np.asarray(recorded.reference, dtype=np.float64)
    if reference.shape != (vector.shape[-1],):
        raise ModelLoadError(
            f"manifest self_check: its reference vector has {reference.size} values, the "
            f"model's vectors {vector.shape[-1]}"
        )
    cosine = cosine_to_reference(vector, reference)
    if cosine < recorded.min_cosine:
        measured = (
            f" (export measured {recorded.measured_cosine:.6f} on {recorded.measured_on})"
            if recorded.measured_cosine is not None
            else ""
        )
        raise ModelLoadError(
            f"self-check failed on this {cpu_description()}: the probe text's vector has "
            f"cosine {cosine:.6f} to the reference recorded at export, below the bundle's "
            f"bound {recorded.min_cosine}{measured}: this CPU computes different vectors "
            "than the bundle was checked with (see docs/cpus.md)"
        )
    return cosine
