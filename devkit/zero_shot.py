"""`siglip-text zero-shot` on the demo bundle, in this process, as the tests run it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def zero_shot(classes: Path, labels: Path, images: Sequence[str | Path], *options: str) -> int:
    """``siglip-text zero-shot --classes CLASSES --labels LABELS --images IMAGES... --demo
    OPTIONS...``; its exit status."""
    from siglip_text.cli import main

    return main(
        [
            "zero-shot",
            "--classes",
            str(classes),
            "--labels",
            str(labels),
            "--images",
            *map(str, images),
            "--demo",
            *options,
        ]
    )
