"""Serving writes nothing under HOME (Lambda's is read-only; ORT telemetry would write there)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devkit.processes import python


@pytest.mark.slow
def test_loading_and_embedding_leave_home_untouched(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY",)}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    code = (
        "from siglip_text.settings import demo_model_dir, load_settings\n"
        "from siglip_text.settings import load_service\n"
        "s = load_service(load_settings(model_dir=demo_model_dir(), ort_intra_op_threads=1))\n"
        "print(s.embed_texts(['a cat']).vectors.shape)\n"
    )
    done = python("-c", code, env=env, timeout=120)
    assert "(1, 32)" in done.stdout
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []
