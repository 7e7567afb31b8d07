"""The init under Lambda Managed Instances, on the demo bundle: the session is built with the
process's share of the CPUs, and the Lambda entry point fails closed when the environment's
memory cannot hold every process's model."""

from __future__ import annotations

from pathlib import Path

import pytest
from siglip_text.assembly import assemble_lambda
from siglip_text.engine.errors import ModelLoadError
from siglip_text.settings import demo_model_dir, load_settings

from devkit.aws_lambda import built_lambda, plain_package_loggers
from devkit.bundles import demo_with_memory


@pytest.fixture
def sized_demo(tmp_path: Path) -> Path:
    """The demo bundle with a memory need in its manifest (the demo's own has none)."""
    return demo_with_memory(tmp_path / "demo", minimum_mb=300, recommended_mb=400)


def test_a_session_under_managed_instances_gets_one_thread_when_processes_fill_the_cpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 10,240 MB would buy 6 vCPUs on Lambda (default); 64 processes outnumber this machine's
    # CPUs, so each process gets one thread whatever the memory
    monkeypatch.delenv("SIGLIP_ORT_INTRA_OP_THREADS", raising=False)
    environ = {
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "10240",
        "AWS_LAMBDA_MAX_CONCURRENCY": "64",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }

    with plain_package_loggers():
        function = assemble_lambda(
            load_settings(model_dir=demo_model_dir(), auth_mode="none"), environ
        )

    assert function.parts is not None and function.parts.service.intra_op_threads == 1


def test_the_entry_point_fails_closed_when_the_processes_do_not_fit(sized_demo: Path) -> None:
    with (
        pytest.raises(ModelLoadError) as refused,
        built_lambda(
            sized_demo, AWS_LAMBDA_FUNCTION_MEMORY_SIZE="1000", AWS_LAMBDA_MAX_CONCURRENCY="4"
        ),
    ):
        pass

    assert "needs at least 1200 MB" in refused.value.message
    assert "4 processes" in refused.value.message


def test_the_entry_point_serves_when_the_environment_holds_every_process(
    sized_demo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with built_lambda(
        sized_demo, AWS_LAMBDA_FUNCTION_MEMORY_SIZE="1600", AWS_LAMBDA_MAX_CONCURRENCY="4"
    ):
        pass

    assert "model loaded" in caplog.text
    assert not [r for r in caplog.records if r.levelname == "WARNING"], caplog.text
