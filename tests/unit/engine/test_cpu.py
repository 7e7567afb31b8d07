"""This CPU's features and the int8 kernel's known answer (engine/cpu.py): the shipped
check graph, the cpuinfo texts it reads, the graphs scripts/make_kernel_check.py writes."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (in the test and export extras)")

from onnx import numpy_helper  # noqa: E402
from siglip_text.engine.cpu import (  # noqa: E402
    KERNEL_CHECK,
    KERNEL_CHECK_EXACT,
    cpu_description,
    cpu_features,
)
from siglip_text.tools.emulation import N1_CPUINFO  # noqa: E402

from devkit.paths import FIXTURES  # noqa: E402


def test_the_shipped_kernel_check_is_255_times_127_over_64() -> None:
    model = onnx.load(str(KERNEL_CHECK))
    (node,) = model.graph.node
    (weight,) = [numpy_helper.to_array(i) for i in model.graph.initializer]
    (activations,) = model.graph.input

    assert node.op_type == "MatMulInteger"
    assert weight.dtype == np.int8 and weight.shape == (64, 1) and (weight == 127).all()
    assert activations.type.tensor_type.elem_type == onnx.TensorProto.UINT8
    assert KERNEL_CHECK_EXACT == 255 * 127 * 64
    assert KERNEL_CHECK.stat().st_size < 1024


def test_cpu_features_read_x86_flags_and_arm64_features() -> None:
    x86 = "model name\t: AMD EPYC\nflags\t\t: fpu sse avx avx2 fma avx512f avx512_vnni\n"
    arm = N1_CPUINFO.read_text()

    assert cpu_features(x86) == ["avx", "avx2", "avx512f", "avx512_vnni"]
    assert cpu_features(arm) == ["asimd", "asimddp"]
    assert "'AMD EPYC' with avx, avx2, avx512f, avx512_vnni" in cpu_description(x86)
    assert "part 0xd0c with asimd, asimddp" in cpu_description(arm)
    assert cpu_features("") == []


def test_kernel_graphs_are_what_the_script_writes() -> None:
    import importlib.util

    from devkit.paths import ROOT

    spec = importlib.util.spec_from_file_location("mkc", ROOT / "scripts/make_kernel_check.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)

    assert KERNEL_CHECK.read_bytes() == script.build()
    for element, weight in script.TEST_CASES:
        fixture = FIXTURES / f"matmul_integer_{element}_{weight}.onnx"
        assert fixture.read_bytes() == script.build(element, weight)
