"""The emulated CPUs of siglip_text.tools.emulation, for the tests (docs/cpus.md).

`run_on_cpu(cpu, bundles)` runs this module as a script on ``cpu`` (under qemu-user); the
child reports, as JSON, this CPU's known-answer ``MatMulInteger`` products for each weight
form and, for each bundle, either the vectors of `TEXTS` or the init error. Results are
exact; speed under emulation (TCG) says nothing about the real CPU.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from siglip_text.tools.emulation import run_python_on, shows_own_cpuinfo, why_not

from devkit.paths import FIXTURES, ROOT

__all__ = ["TEXTS", "run_on_cpu", "shows_own_cpuinfo", "why_not"]

TEXTS = ["a photo of a cat", "Two DOGS playing in the Snow", "一只猫的照片", "a red block " * 12]

#: weight form -> (ONNX element type name, the largest weight of the form)
KERNEL_CASES = {"int8": ("int8", 127), "int7": ("int8", 64), "uint8": ("uint8", 255)}
DEPTH = 64
ACTIVATION = 255


def kernel_fixture(element: str, weight: int) -> Path:
    """The known-answer graph for a weight form (scripts/make_kernel_check.py writes them)."""
    return FIXTURES / f"matmul_integer_{element}_{weight}.onnx"


def run_on_cpu(cpu: str, bundles: dict[str, Path], *, timeout: float = 900) -> dict[str, Any]:
    """What the child reports on ``cpu`` (see `report`)."""
    args = ["-m", "devkit.cpus", *(f"{name}={path}" for name, path in bundles.items())]
    out = run_python_on(cpu, args, path=(ROOT,), timeout=timeout)
    return dict(json.loads(out.splitlines()[-1]))


def report(bundles: dict[str, Path]) -> dict[str, Any]:
    """This CPU's kernel products and, per bundle, its vectors of `TEXTS` or its init error."""
    import numpy as np
    import onnxruntime as ort
    from siglip_text.engine.cpu import cpu_features
    from siglip_text.engine.errors import SiglipError
    from siglip_text.settings import load_service, load_settings

    kernels = {}
    for form, (element, weight) in KERNEL_CASES.items():
        path = kernel_fixture(element, weight)
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        (product,) = session.run(None, {"a": np.full((1, DEPTH), ACTIVATION, dtype=np.uint8)})
        kernels[form] = int(np.asarray(product).ravel()[0])
    results: dict[str, Any] = {}
    for name, path in bundles.items():
        settings = load_settings(model_dir=path, ort_intra_op_threads=1)
        try:
            service = load_service(settings)
        except SiglipError as exc:
            results[name] = {"error": exc.message}
            continue
        results[name] = {"vectors": service.embed_texts(TEXTS).vectors.tolist()}
    return {"features": cpu_features(), "kernels": kernels, "bundles": results}


def main(argv: list[str]) -> int:
    bundles = {}
    for arg in argv:
        name, _, path = arg.partition("=")
        bundles[name] = Path(path)
    print(json.dumps(report(bundles)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
