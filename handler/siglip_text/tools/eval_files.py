"""The evaluation files users download, read as the seed's guide reads them.

- ``imagenet1000_clsidx_to_labels.txt``: a Python dict literal ``{0: 'tench, Tinca tinca',
  ...}``, parsed with ``ast.literal_eval`` (never executed); keys 0..N-1, values strings.
  The seed (../shared/seeds/vllm-siglip2-guide.md, section 7.2) formats each whole value,
  every comma-separated synonym included, into its template: so does this module.
- ``val_label.txt``: ``ILSVRC2012_val_00000001.JPEG 65`` per line; an image is keyed by
  its file name up to the first dot (the seed's ``parts[0].split(".")[0]``).
- image vectors keyed by that stem: ``.npy`` rows with an id file (one id per line), or
  JSONL records ``{"id": ..., "embedding": [...]}``.

A class file that cannot be parsed is refused, never read as raw lines: one class name per
line is a format the caller names (``--classes-format lines``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from .exit_status import ToolError
from .files import is_jsonl, load_matrix, read_jsonl, read_texts

ClassesFormat = Literal["dict", "lines"]
CLASSES_FORMATS: tuple[ClassesFormat, ...] = ("dict", "lines")

#: One line of ``val_label.txt``: an image file name and its class index.
_KEYED_LABEL = re.compile(r"^\s*(\S+)\s+(-?\d+)\s*$")


def image_key(name: str) -> str:
    """The key an image is known by: its file name without directories, up to the first dot."""
    return name.replace("\\", "/").rsplit("/", 1)[-1].split(".")[0]


def read_class_names(path: Path, form: ClassesFormat = "dict") -> list[str]:
    """Class names, index = position, from the dict literal (default) or one name per line."""
    if form == "lines":
        names, _ = read_texts(path)
        names = [name.strip() for name in names]
        if not any(names):
            raise ToolError(f"classes {path}: no class names")
        return names
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"classes {path}: cannot be read ({exc})") from None
    hint = (
        "expected a Python dict literal {0: 'tench, Tinca tinca', 1: ...} as in "
        "imagenet1000_clsidx_to_labels.txt; for one class name per line pass "
        "--classes-format lines"
    )
    try:
        value = ast.literal_eval(content.strip())
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as exc:
        detail = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
        where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        raise ToolError(f"classes {path}: not parsable{where}: {detail}; {hint}") from None
    if not isinstance(value, dict) or not value:
        raise ToolError(f"classes {path}: {type(value).__name__}, not a non-empty dict; {hint}")
    keys = list(value)
    if not all(type(key) is int for key in keys) or sorted(keys) != list(range(len(keys))):
        raise ToolError(f"classes {path}: the keys must be the integers 0..{len(keys) - 1}")
    names = [value[i] for i in range(len(keys))]
    for index, name in enumerate(names):
        if not isinstance(name, str) or not name.strip():
            raise ToolError(f"classes {path}: class {index} is not a non-empty string")
    return names


@dataclass(frozen=True)
class Labels:
    """True class indices: by position (one per image row) or by image key."""

    by_position: np.ndarray | None = None
    by_key: dict[str, int] | None = None


def read_labels(path: Path, classes: list[str]) -> Labels:
    """``.npy`` integers, ``val_label.txt`` lines, or one class index or name per line."""
    if path.suffix.lower() == ".npy":
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ToolError(f"labels {path}: cannot be read ({exc})") from None
        if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
            raise ToolError(f"labels {path}: expected a 1-D integer array")
        return Labels(by_position=_checked(path, array.astype(np.int64), len(classes)))
    lines = [(n, line.strip()) for n, line in enumerate(read_texts(path)[0], start=1)]
    lines = [(n, line) for n, line in lines if line]
    if lines and all(_KEYED_LABEL.match(line) for _, line in lines):
        by_key: dict[str, int] = {}
        for number, line in lines:
            match = _KEYED_LABEL.match(line)
            assert match is not None
            key, index = image_key(match[1]), int(match[2])
            if key in by_key:
                raise ToolError(f"labels {path}:{number}: image {key!r} is labelled twice")
            if not 0 <= index < len(classes):
                raise ToolError(
                    f"labels {path}:{number}: class {index} is not in [0, {len(classes)})"
                )
            by_key[key] = index
        return Labels(by_key=by_key)
    index_of = {name: i for i, name in enumerate(classes)}
    values = []
    for number, token in lines:
        if token.lstrip("-").isdigit():
            values.append(int(token))
        elif token in index_of:
            values.append(index_of[token])
        else:
            raise ToolError(
                f"labels {path}:{number}: {token!r} is not a class index, a class name or "
                "'IMAGE_FILE CLASS_INDEX' (val_label.txt)"
            )
    return Labels(by_position=_checked(path, np.asarray(values, dtype=np.int64), len(classes)))


def _checked(path: Path, labels: np.ndarray, classes: int) -> np.ndarray:
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        raise ToolError(f"labels {path}: class indices must be in [0, {classes})")
    return labels


@dataclass(frozen=True)
class Images:
    """Image vectors, and the key of each row where the file names them."""

    vectors: np.ndarray
    keys: list[str] | None


def read_images(path: Path, ids: Path | None = None) -> Images:
    """``.npy`` rows (keys from ``ids``, one per line) or JSONL ``{"id", "embedding"}``."""
    if is_jsonl(path):
        if ids is not None:
            raise ToolError("--image-ids is for .npy images; JSONL records carry their id")
        records = read_jsonl(path)
        if not records:
            raise ToolError(f"images {path}: no records")
        keys, rows = [], []
        for number, record in enumerate(records, start=1):
            identifier, embedding = record.get("id"), record.get("embedding")
            if not isinstance(identifier, (str, int)) or isinstance(identifier, bool):
                raise ToolError(f"images {path}: record {number} has no string 'id'")
            if not isinstance(embedding, list) or not embedding:
                raise ToolError(f"images {path}: record {number} has no 'embedding' list")
            keys.append(image_key(str(identifier)))
            rows.append(embedding)
        try:
            vectors = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError):
            raise ToolError(f"images {path}: embeddings must be numbers of one length") from None
        if vectors.ndim != 2 or not np.isfinite(vectors).all():
            raise ToolError(f"images {path}: embeddings must be finite numbers of one length")
        return Images(vectors, _unique(path, keys))
    vectors = load_matrix(path, what="images")
    if ids is None:
        return Images(vectors, None)
    names = [line.strip() for line in read_texts(ids)[0] if line.strip()]
    if len(names) != len(vectors):
        raise ToolError(f"--image-ids {ids}: {len(names)} ids for {len(vectors)} image rows")
    return Images(vectors, _unique(ids, [image_key(name) for name in names]))


def _unique(path: Path, keys: list[str]) -> list[str]:
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            raise ToolError(f"{path}: image {key!r} appears twice")
        seen.add(key)
    return keys


@dataclass(frozen=True)
class Evaluation:
    """The image rows to rank and their true classes, matched by key or by position."""

    vectors: np.ndarray
    labels: np.ndarray
    unmatched_labels: int
    keys: list[str] | None = None


def match(images: Images, labels: Labels) -> Evaluation:
    """Pair each image with its label; every image needs one, extra labels are counted."""
    if labels.by_key is not None:
        if images.keys is None:
            raise ToolError(
                "the labels name image files (val_label.txt): give the images' ids "
                "(--image-ids with .npy, or JSONL images with an 'id' per record)"
            )
        missing = [key for key in images.keys if key not in labels.by_key]
        if missing:
            raise ToolError(
                f"{len(missing)} image(s) have no label, e.g. {missing[0]!r} "
                "(keys are file names up to the first dot)"
            )
        found = np.asarray([labels.by_key[key] for key in images.keys], dtype=np.int64)
        unmatched = len(labels.by_key) - len(images.keys)
        return Evaluation(images.vectors, found, unmatched, images.keys)
    assert labels.by_position is not None
    if len(labels.by_position) != len(images.vectors):
        raise ToolError(f"{len(labels.by_position)} labels for {len(images.vectors)} images")
    return Evaluation(images.vectors, labels.by_position, 0, images.keys)
