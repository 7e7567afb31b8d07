"""`siglip-text zero-shot`: top-1 / top-5 accuracy from precomputed image embeddings.

Each class is embedded through prompt templates (default ``"this is a photo of {}."``);
with several templates the unit vectors of a class's prompts are averaged and renormalized.
Each image's classes are ranked by cosine. The image vectors come from your existing index
(``.npy``, ``[N, D]``): no image is re-embedded.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .backends import Embedder, add_backend_arguments, embed_in_batches, open_embedder
from .exit_status import ToolError
from .files import load_matrix, read_texts, write_jsonl
from .parity import top_k, unit_rows

DEFAULT_TEMPLATE = "this is a photo of {}."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--images", type=Path, required=True, help="image embeddings [N, D] .npy")
    parser.add_argument(
        "--labels",
        type=Path,
        required=True,
        help="true class per image: .npy of integers, or a text file with a class index or "
        "class name per line",
    )
    parser.add_argument(
        "--classes", type=Path, required=True, help="class names, one per line (index = line)"
    )
    parser.add_argument(
        "--template",
        action="append",
        help=f'prompt template with "{{}}" for the class name (repeatable; default '
        f'"{DEFAULT_TEMPLATE}")',
    )
    parser.add_argument("--templates", type=Path, help="a file of templates, one per line")
    parser.add_argument("--predictions", type=Path, help="write each image's top 5 as JSONL")
    parser.add_argument("--json", type=Path, help="write the accuracies as JSON")
    add_backend_arguments(parser)


def run(args: argparse.Namespace) -> int:
    classes, _ = read_texts(args.classes)
    if not classes:
        raise ToolError(f"{args.classes}: no class names")
    templates = list(args.template or [])
    if args.templates:
        templates += [t for t in read_texts(args.templates)[0] if t.strip()]
    templates = templates or [DEFAULT_TEMPLATE]
    for template in templates:
        if "{}" not in template:
            raise ToolError(f"template {template!r} has no {{}} for the class name")
    images = load_matrix(args.images, what="images")
    labels = read_labels(args.labels, classes)
    if len(labels) != len(images):
        raise ToolError(f"{len(labels)} labels for {len(images)} images")
    embedder = open_embedder(args)
    if images.shape[1] != embedder.dimension:
        raise ToolError(
            f"images have dimension {images.shape[1]}; the model's is {embedder.dimension}"
        )
    class_vectors = class_embeddings(embedder, classes, templates, batch_size=args.batch_size)
    result = accuracy(images, labels, class_vectors)
    print(
        f"zero-shot {embedder.model_id}: {result['images']} images, {result['classes']} classes, "
        f"{len(templates)} template(s)\n"
        f"  top-1 {100 * result['top1']:.2f}%   top-5 {100 * result['top5']:.2f}%"
    )
    if args.json:
        args.json.write_text(json.dumps({**result, "templates": templates}, indent=2) + "\n")
    if args.predictions:
        ranked = top_k(unit_rows(images) @ class_vectors.T, 5)
        write_jsonl(
            args.predictions,
            (
                {"index": i, "label": int(labels[i]), "top5": [classes[c] for c in row]}
                for i, row in enumerate(ranked.tolist())
            ),
        )
    return 0


def read_labels(path: Path, classes: Sequence[str]) -> np.ndarray:
    """Class indices from ``.npy`` integers or a text file of indices or class names."""
    labels: np.ndarray
    if path.suffix.lower() == ".npy":
        try:
            labels = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ToolError(f"labels {path}: cannot be read ({exc})") from None
        if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
            raise ToolError(f"labels {path}: expected a 1-D integer array")
    else:
        index = {name: i for i, name in enumerate(classes)}
        values = []
        for number, line in enumerate(read_texts(path)[0], start=1):
            token = line.strip()
            if token.lstrip("-").isdigit():
                values.append(int(token))
            elif token in index:
                values.append(index[token])
            else:
                raise ToolError(f"labels {path}:{number}: {token!r} is not a class index or name")
        labels = np.asarray(values, dtype=np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= len(classes)):
        raise ToolError(f"labels {path}: class indices must be in [0, {len(classes)})")
    result: np.ndarray = labels.astype(np.int64)
    return result


def class_embeddings(
    embedder: Embedder, classes: Sequence[str], templates: Sequence[str], *, batch_size: int = 64
) -> np.ndarray:
    """One unit vector per class: the renormalized mean of its prompts' unit vectors."""
    prompts = [template.replace("{}", name) for name in classes for template in templates]
    vectors = unit_rows(embed_in_batches(embedder.embed_texts, prompts, batch_size=batch_size))
    per_class = vectors.reshape(len(classes), len(templates), -1).mean(axis=1)
    return unit_rows(per_class)


def accuracy(images: np.ndarray, labels: np.ndarray, class_vectors: np.ndarray) -> dict[str, Any]:
    """Top-1 and top-5 accuracy of ranking the classes by cosine to each image."""
    ranked = top_k(unit_rows(images) @ class_vectors.T, 5)
    hits = ranked == labels[:, None]
    return {
        "images": int(len(labels)),
        "classes": int(class_vectors.shape[0]),
        "top1": float(hits[:, 0].mean()),
        "top5": float(hits.any(axis=1).mean()),
    }
