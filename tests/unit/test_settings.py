from __future__ import annotations

from pathlib import Path

import pytest
from siglip_text.aws.sizing import lambda_cpus
from siglip_text.engine import cpu
from siglip_text.engine.errors import ConfigError
from siglip_text.settings import Settings, load_settings


def test_model_dir_gives_all_three_artifact_paths(tmp_path: Path) -> None:
    manifest, onnx, tokenizer = load_settings(model_dir=tmp_path).artifact_paths()
    assert (manifest, onnx, tokenizer) == (
        tmp_path / "manifest.json",
        tmp_path / "text_model.onnx",
        tmp_path / "tokenizer.json",
    )


def test_explicit_path_variables_win_over_model_dir(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SIGLIP_MODEL_DIR", str(tmp_path))
    monkeypatch.setenv("SIGLIP_ONNX_MODEL_PATH", "/opt/model/int8.onnx")
    _, onnx, _ = Settings().artifact_paths()
    assert onnx == Path("/opt/model/int8.onnx")


def test_missing_artifact_paths_name_the_variables(monkeypatch) -> None:
    for var in ("SIGLIP_MODEL_DIR", "SIGLIP_MODEL_MANIFEST_PATH"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigError, match="SIGLIP_MODEL_MANIFEST_PATH.*SIGLIP_MODEL_DIR"):
        Settings().artifact_paths()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SIGLIP_MAX_TEXT_BATCH_SIZE", "0"),
        ("SIGLIP_MAX_TEXT_BATCH_SIZE", "many"),
        ("SIGLIP_ORT_INTRA_OP_THREADS", "-2"),
        ("SIGLIP_AUTH_MODE", "password"),
    ],
)
def test_invalid_setting_error_names_the_variable(monkeypatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=variable):
        load_settings()


def test_explicit_thread_count_is_used(monkeypatch) -> None:
    monkeypatch.setenv("SIGLIP_ORT_INTRA_OP_THREADS", "3")
    assert load_settings().intra_op_threads() == 3


def test_default_threads_follow_cgroup_quota_not_cpu_count(monkeypatch, tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cpu._cgroup_cpu_quota(tmp_path) == 2
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cpu._cgroup_cpu_quota(tmp_path) is None


def test_cgroup_v1_quota_is_read(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cpu._cgroup_cpu_quota(tmp_path) == 1


def test_lambda_memory_share_bounds_the_default_threads(monkeypatch) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1769")
    monkeypatch.setattr(cpu.os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3, 4, 5})
    monkeypatch.setattr(cpu, "_cgroup_cpu_quota", lambda: None)
    assert lambda_cpus() == 1
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "10240")
    assert lambda_cpus() == 6
