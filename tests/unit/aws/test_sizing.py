"""The memory guard (sizing.py): the function's memory against the manifest's need, for every
process of an environment on Lambda Managed Instances, one on Lambda (default)."""

from __future__ import annotations

import pytest
from siglip_text.aws.sizing import check_function_memory
from siglip_text.engine.bundle import Manifest, MemoryNeed
from siglip_text.engine.errors import ModelLoadError
from siglip_text.settings import demo_model_dir

#: The need export recorded for the base bundles (docs/sizes.md).
BASE_FP32 = MemoryNeed(minimum_mb=477, recommended_mb=1227, basis="base fp32")


def _manifest(need: MemoryNeed) -> Manifest:
    demo = Manifest.model_validate_json((demo_model_dir() / "manifest.json").read_text())
    return demo.model_copy(update={"memory": need})


def test_the_guard_refuses_an_environment_that_cannot_hold_every_process() -> None:
    # 2,048 MB holds four base fp32 minimums (1,908 MB) but not five
    environ = {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "2048"}

    with pytest.raises(ModelLoadError) as refused:
        check_function_memory(_manifest(BASE_FP32), environ, processes=5)

    message = refused.value.message
    assert "needs at least 2385 MB" in message
    assert "each of the 5 processes" in message
    assert "PerExecutionEnvironmentMaxConcurrency" in message


def test_the_guard_warns_when_the_processes_cannot_keep_their_models_resident() -> None:
    environ = {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "2048"}

    warning = check_function_memory(_manifest(BASE_FP32), environ, processes=4)

    assert warning is not None
    assert "below the 4908 MB" in warning
    assert check_function_memory(_manifest(BASE_FP32), environ, processes=1) is None


def test_the_guard_counts_one_process_on_lambda_default() -> None:
    assert (
        check_function_memory(_manifest(BASE_FP32), {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1769"})
        is None
    )
