"""Bundles changed on purpose, for the checks that must notice."""

from __future__ import annotations

from pathlib import Path


def tampered(bundle: Path) -> None:
    """One byte of the graph changed in place: same size, another sha256."""
    path = bundle / "text_model.onnx"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
