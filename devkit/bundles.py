"""Copies of the demo bundle changed for one test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from siglip_text.settings import demo_model_dir


def demo_with_memory(directory: Path, *, minimum_mb: int, recommended_mb: int) -> Path:
    """The demo bundle copied to ``directory`` with a memory need in its manifest (the
    demo's own records none), as export records it."""
    shutil.copytree(demo_model_dir(), directory)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["memory"] = {
        "minimum_mb": minimum_mb,
        "recommended_mb": recommended_mb,
        "basis": "test",
    }
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory
