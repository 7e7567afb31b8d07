"""The int8 weight forms against the AVX2 kernel's limit: no pair of uint8 x int8 products
may pass 32,767 (quantize.py, docs/cpus.md). Checked on the weights of a real quantized
graph (the demo tower), every integer GEMM's weight read back from the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (in the test and export extras)")

from siglip_text.engine.bundle import Quantization  # noqa: E402
from siglip_text.tools.export.quantize import (  # noqa: E402
    INTEGER_GEMMS,
    PAIR_LIMIT,
    integer_weights,
    quantize_int8,
)


def _quantized(directory: Path, form: str) -> tuple[object, Quantization]:
    from siglip_text.settings import demo_model_dir

    target = directory / form / "text_model.onnx"
    info = quantize_int8(demo_model_dir() / "text_model.onnx", target, weight_form=form)  # type: ignore[arg-type]
    return onnx.load(str(target)), info.record()


def _largest_pair(weights: np.ndarray) -> int:
    """255 times the two largest weight magnitudes of one output column, over all columns:
    the most any two products of a column can add up to, however the kernel pairs them."""
    magnitudes = np.sort(np.abs(weights.astype(np.int64)), axis=0)
    return int(255 * (magnitudes[-1] + magnitudes[-2]).max())


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[object, Quantization]]:
    directory = tmp_path_factory.mktemp("forms")
    return {form: _quantized(directory, form) for form in ("int7", "int8", "uint8")}


def test_default_form_weights_cannot_saturate_a_pair_of_products(graphs) -> None:
    model, info = graphs["int7"]
    gemms = [n for n in model.graph.node if n.op_type in INTEGER_GEMMS]
    weights = integer_weights(model)

    assert len(weights) == len(gemms) >= 12  # every integer GEMM's weight was read
    assert {w.dtype for w in weights} == {np.dtype(np.int8)}
    assert max(_largest_pair(w) for w in weights) <= PAIR_LIMIT
    assert info.saturation_free is True and info.weight_form == "int7"


def test_full_range_int8_weights_can_pass_the_limit_and_say_so(graphs) -> None:
    model, info = graphs["int8"]

    assert max(_largest_pair(w) for w in integer_weights(model)) > PAIR_LIMIT
    assert info.saturation_free is False


def test_uint8_weights_go_to_the_widening_kernels(graphs) -> None:
    model, info = graphs["uint8"]

    assert {w.dtype for w in integer_weights(model)} == {np.dtype(np.uint8)}
    assert info.saturation_free is True
