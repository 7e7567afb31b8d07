"""Files the tools read and write: texts (one per line, or JSONL), JSONL records, .npy."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from .exit_status import ToolError

JSONL_SUFFIXES = (".jsonl", ".ndjson")


def is_jsonl(path: Path) -> bool:
    return path.suffix.lower() in JSONL_SUFFIXES


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every non-blank line must be a JSON object; errors name the file and the line.

    Lines end at ``\n`` only: ``str.splitlines`` also breaks at characters that JSON leaves
    raw inside strings (U+2028, U+0085, U+001C...), which ``write_jsonl`` writes as they are.
    """
    records = []
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"{path}: cannot be read ({exc})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ToolError(f"{path}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise ToolError(f"{path}:{number}: each line must be a JSON object")
        records.append(record)
    return records


def read_texts(path: Path, *, field: str = "text") -> tuple[list[str], list[dict[str, Any]] | None]:
    """Texts from a text file (line i is text i; an empty line is an empty text) or JSONL.

    Returns the texts and, for JSONL, the records they came from.
    """
    if is_jsonl(path):
        records = read_jsonl(path)
        texts = []
        for number, record in enumerate(records, start=1):
            value = record.get(field)
            if not isinstance(value, str):
                raise ToolError(f"{path}: record {number} has no string field {field!r}")
            texts.append(value)
        return texts, records
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"{path}: cannot be read ({exc})") from None
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines], None


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> int:
    count = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count


def load_matrix(path: Path, *, what: str) -> np.ndarray:
    """A 2-D float matrix from ``.npy`` (never pickles)."""
    try:
        matrix: np.ndarray = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ToolError(f"{what} {path}: cannot be read as .npy ({exc})") from None
    if matrix.ndim != 2 or not np.issubdtype(matrix.dtype, np.floating):
        raise ToolError(
            f"{what} {path}: expected a 2-D float matrix, got {matrix.dtype} {matrix.shape}"
        )
    if not np.isfinite(matrix).all():
        raise ToolError(f"{what} {path}: contains NaN or infinity")
    return matrix
