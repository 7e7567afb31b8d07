"""`siglip-text zero-shot` on synthetic image embeddings whose rankings are set by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from siglip_text.engine.service import EmbeddingService
from siglip_text.settings import demo_model_dir
from siglip_text.tools.backends import LocalEmbedder
from siglip_text.tools.zero_shot import DEFAULT_TEMPLATE, accuracy, class_embeddings

from devkit.zero_shot import zero_shot

CLASSES = ["cat", "dog", "bird", "car", "robot arm", "red block", "kitchen", "beach"]
#: For each image: its true class, and the rank (1 = best) that class gets among the 8.
LABELS = [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]
RANKS = [1, 1, 1, 1, 1, 1, 2, 3, 5, 6]
TOP1, TOP5 = 6 / 10, 9 / 10  # ranks 1 six times; ranks <= 5 nine times


def images_with_ranks(class_vectors: np.ndarray) -> np.ndarray:
    """Image vectors whose cosine to the classes follows a chosen order exactly.

    The 8 class vectors are independent, so for any target scores s there is a v with
    C v = s (least squares, exact); its norm does not change the order.
    """
    pseudo_inverse = np.linalg.pinv(class_vectors)
    rows = []
    for label, rank in zip(LABELS, RANKS, strict=True):
        others = [c for c in range(len(CLASSES)) if c != label]
        order = others[: rank - 1] + [label] + others[rank - 1 :]
        scores = np.empty(len(CLASSES))
        scores[order] = np.linspace(0.9, 0.1, len(CLASSES))
        rows.append(pseudo_inverse @ scores)
    return np.asarray(rows, dtype=np.float32)


@pytest.fixture
def class_vectors(service: EmbeddingService) -> np.ndarray:
    return class_embeddings(LocalEmbedder(service, paths=_paths()), CLASSES, [DEFAULT_TEMPLATE])


def _paths() -> tuple[Path, Path, Path]:
    demo = demo_model_dir()
    return demo / "manifest.json", demo / "text_model.onnx", demo / "tokenizer.json"


def test_accuracy_of_hand_set_rankings_is_the_one_computed_by_hand(
    class_vectors: np.ndarray,
) -> None:
    result = accuracy(images_with_ranks(class_vectors), np.asarray(LABELS), class_vectors)

    assert result["top1"] == pytest.approx(TOP1)
    assert result["top5"] == pytest.approx(TOP5)


def test_zero_shot_command_reports_top1_and_top5_from_files(
    class_vectors: np.ndarray, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN an index's image vectors, labels by class name, and the class list
    np.save(tmp_path / "images.npy", images_with_ranks(class_vectors))
    (tmp_path / "labels.txt").write_text("\n".join(CLASSES[i] for i in LABELS) + "\n")
    (tmp_path / "classes.txt").write_text("\n".join(CLASSES) + "\n")

    # WHEN zero-shot runs with the default template on the demo bundle
    status = zero_shot(
        tmp_path / "classes.txt",
        tmp_path / "labels.txt",
        [tmp_path / "images.npy"],
        "--classes-format",
        "lines",
        "--threads",
        "1",
        "--json",
        str(tmp_path / "result.json"),
        "--predictions",
        str(tmp_path / "predictions.jsonl"),
    )

    # THEN it prints and records the accuracies computed by hand
    assert status == 0
    assert "top-1 60.00%   top-5 90.00%" in capsys.readouterr().out
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["top1"] == pytest.approx(TOP1) and result["top5"] == pytest.approx(TOP5)
    assert result["templates"] == [DEFAULT_TEMPLATE]
    first = json.loads((tmp_path / "predictions.jsonl").read_text().splitlines()[0])
    assert first["top5"][0] == CLASSES[LABELS[0]]


def test_several_templates_average_the_prompt_vectors_of_each_class(
    service: EmbeddingService,
) -> None:
    templates = ["a photo of a {}.", "a drawing of a {}."]
    embedder = LocalEmbedder(service, paths=_paths())

    vectors = class_embeddings(embedder, ["cat"], templates)

    prompts = service.embed_texts([t.format("cat") for t in templates]).vectors.mean(axis=0)
    assert vectors[0] == pytest.approx(prompts / np.linalg.norm(prompts), abs=1e-6)


def test_zero_shot_refuses_labels_that_do_not_match_the_images(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "images.npy", np.ones((3, 32), dtype=np.float32))
    np.save(tmp_path / "labels.npy", np.array([0, 1]))
    (tmp_path / "classes.txt").write_text("cat\ndog\n")

    status = zero_shot(
        tmp_path / "classes.txt",
        tmp_path / "labels.npy",
        [tmp_path / "images.npy"],
        "--classes-format",
        "lines",
    )

    assert status == 2
    assert "2 labels for 3 images" in capsys.readouterr().err
