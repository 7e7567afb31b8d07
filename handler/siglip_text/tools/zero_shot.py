"""`siglip-text zero-shot`: top-1 / top-5 accuracy from precomputed image embeddings.

The evaluation of the seed's guide (section 7), from the files it downloads: the class dict
``imagenet1000_clsidx_to_labels.txt``, ``val_label.txt`` and the image vectors of your index,
keyed by image file name (eval_files.py reads them). Each class is embedded through prompt
templates (default the seed's ``"This is a photo of {}."``, the whole class value in the
braces); with several templates the unit vectors of a class's prompts are averaged and
renormalized. The bundle's tokenizer applies its manifest's lowercasing to every prompt.
Each image's classes are ranked by cosine; no image is re-embedded.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .backends import Embedder, add_backend_arguments, embed_in_batches, open_embedder
from .eval_files import CLASSES_FORMATS, match, read_class_names, read_images, read_labels
from .exit_status import ToolError
from .files import read_texts, write_jsonl
from .parity import top_k, unit_rows

#: The seed's template (vllm-siglip2-guide.md, sections 6.1 and 7.2), as it writes it.
DEFAULT_TEMPLATE = "This is a photo of {}."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--images",
        type=Path,
        required=True,
        help="image embeddings: [N, D] .npy (with --image-ids to key rows by file name), or "
        'JSONL of {"id": FILE_OR_STEM, "embedding": [...]}',
    )
    parser.add_argument(
        "--image-ids",
        type=Path,
        help="with .npy images: the image file name (or stem) of each row, one per line",
    )
    parser.add_argument(
        "--labels",
        type=Path,
        required=True,
        help="true classes: val_label.txt ('ILSVRC2012_val_00000001.JPEG 65' per line, "
        "matched to the images by file stem), .npy of integers, or a class index or class "
        "name per line (in image order)",
    )
    parser.add_argument(
        "--classes",
        type=Path,
        required=True,
        help="class names: the dict literal of imagenet1000_clsidx_to_labels.txt "
        "({0: 'tench, Tinca tinca', ...}), or one per line with --classes-format lines",
    )
    parser.add_argument(
        "--classes-format",
        choices=CLASSES_FORMATS,
        default="dict",
        help="dict (default): a Python dict literal, index -> name; lines: one name per line",
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
    classes = read_class_names(args.classes, args.classes_format)
    templates = list(args.template or [])
    if args.templates:
        templates += [t for t in read_texts(args.templates)[0] if t.strip()]
    templates = templates or [DEFAULT_TEMPLATE]
    for template in templates:
        if "{}" not in template:
            raise ToolError(f"template {template!r} has no {{}} for the class name")
    evaluation = match(read_images(args.images, args.image_ids), read_labels(args.labels, classes))
    images, labels = evaluation.vectors, evaluation.labels
    embedder = open_embedder(args)
    if images.shape[1] != embedder.dimension:
        raise ToolError(
            f"images have dimension {images.shape[1]}; the model's is {embedder.dimension}"
        )
    class_vectors = class_embeddings(embedder, classes, templates, batch_size=args.batch_size)
    result = accuracy(images, labels, class_vectors)
    skipped = (
        f" ({evaluation.unmatched_labels} labelled images without a vector skipped)"
        if evaluation.unmatched_labels
        else ""
    )
    print(
        f"zero-shot {embedder.model_id}: {result['images']} images{skipped}, "
        f"{result['classes']} classes, {len(templates)} template(s)\n"
        f"  top-1 {100 * result['top1']:.2f}%   top-5 {100 * result['top5']:.2f}%"
    )
    if args.json:
        args.json.write_text(json.dumps({**result, "templates": templates}, indent=2) + "\n")
    if args.predictions:
        ranked = top_k(unit_rows(images) @ class_vectors.T, 5)
        write_jsonl(
            args.predictions,
            (
                {
                    "index": i,
                    **({"id": evaluation.keys[i]} if evaluation.keys else {}),
                    "label": int(labels[i]),
                    "top5": [classes[c] for c in row],
                }
                for i, row in enumerate(ranked.tolist())
            ),
        )
    return 0


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
