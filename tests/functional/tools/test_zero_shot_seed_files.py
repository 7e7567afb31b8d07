"""`siglip-text zero-shot` on the seed's own file formats (vllm-siglip2-guide.md, section 7).

The class file is the dict literal of ``imagenet1000_clsidx_to_labels.txt``, the labels are
``val_label.txt`` lines, and the image vectors are keyed by image file name: each image
vector here is the class vector of a chosen class, so the right top-1 is known by
construction.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from siglip_text.engine.bundle import BundlePaths
from siglip_text.engine.service import EmbeddingService
from siglip_text.settings import demo_model_dir
from siglip_text.tools.backends import LocalEmbedder
from siglip_text.tools.zero_shot import DEFAULT_TEMPLATE, class_embeddings

from devkit.zero_shot import zero_shot

#: As the gist writes it: the whole value, synonyms and all, is one class name.
CLASS_DICT = """{0: 'tench, Tinca tinca',
 1: 'goldfish, Carassius auratus',
 2: 'red block',
 3: 'robot arm',
 4: 'kitten on the beach',
 5: "dog's bowl, water dish"}
"""
CLASSES = [
    "tench, Tinca tinca",
    "goldfish, Carassius auratus",
    "red block",
    "robot arm",
    "kitten on the beach",
    "dog's bowl, water dish",
]
#: image number -> (its true class, the class whose vector it gets): 5 of 8 right.
IMAGES = {1: (0, 0), 2: (1, 1), 3: (2, 2), 4: (3, 3), 5: (4, 4), 6: (5, 0), 7: (2, 3), 8: (1, 5)}
TOP1 = 5 / 8
DEMO_PATHS = BundlePaths.in_dir(demo_model_dir())


def _name(number: int) -> str:
    return f"ILSVRC2012_val_{number:08d}.JPEG"


def seed_zero_shot(
    seed_files: Path,
    *options: str,
    classes: str = "imagenet1000_clsidx_to_labels.txt",
    images: str = "images.jsonl",
) -> int:
    """`zero-shot` on the seed files: ``classes``, ``val_label.txt`` and ``images``."""
    labels = seed_files / "val_label.txt"
    return zero_shot(seed_files / classes, labels, [seed_files / images], *options)


@pytest.fixture
def seed_files(service: EmbeddingService, tmp_path: Path) -> Path:
    """The class dict, val_label.txt (more images than the index holds, in another order),
    and image vectors as .npy + ids and as JSONL."""
    embedder = LocalEmbedder(service, paths=DEMO_PATHS)
    class_vectors = class_embeddings(embedder, CLASSES, [DEFAULT_TEMPLATE])
    (tmp_path / "imagenet1000_clsidx_to_labels.txt").write_text(CLASS_DICT)
    labels = [f"{_name(n)} {truth}" for n, (truth, _) in sorted(IMAGES.items(), reverse=True)]
    labels.append(f"{_name(99)} 4")  # labelled, never embedded: skipped, as counted
    (tmp_path / "val_label.txt").write_text("\n".join(labels) + "\n")
    vectors = np.asarray([class_vectors[given] for _, given in IMAGES.values()], np.float32)
    np.save(tmp_path / "images.npy", vectors)
    (tmp_path / "image_ids.txt").write_text("\n".join(f"val/{_name(n)}" for n in IMAGES) + "\n")
    with (tmp_path / "images.jsonl").open("w") as handle:
        for number, vector in zip(IMAGES, vectors, strict=True):
            stem = _name(number).split(".")[0]
            handle.write(json.dumps({"id": stem, "embedding": vector.tolist()}) + "\n")
    return tmp_path


@pytest.mark.parametrize("form", ["npy-with-ids", "jsonl"])
def test_seed_files_give_the_top1_known_by_construction(
    seed_files: Path, form: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the two downloaded files and image vectors keyed by file name
    if form == "jsonl":
        images = [str(seed_files / "images.jsonl")]
    else:
        images = [str(seed_files / "images.npy"), "--image-ids", str(seed_files / "image_ids.txt")]

    # WHEN zero-shot runs on them with the seed's template
    status = zero_shot(
        seed_files / "imagenet1000_clsidx_to_labels.txt",
        seed_files / "val_label.txt",
        images,
        "--threads",
        "1",
        "--json",
        str(seed_files / "result.json"),
        "--predictions",
        str(seed_files / "predictions.jsonl"),
    )

    # THEN top-1 is the one set by construction, each image matched by its stem
    out = capsys.readouterr().out
    assert status == 0
    assert "top-1 62.50%" in out
    assert "8 images (1 labelled images without a vector skipped), 6 classes" in out
    result = json.loads((seed_files / "result.json").read_text())
    assert result["top1"] == pytest.approx(TOP1)
    assert result["templates"] == ["This is a photo of {}."]
    predictions = [json.loads(line) for line in (seed_files / "predictions.jsonl").open()]
    assert predictions[5]["id"] == "ILSVRC2012_val_00000006"
    assert predictions[5]["label"] == 5
    assert predictions[5]["top5"][0] == "tench, Tinca tinca"  # the whole dict value


def test_class_names_are_the_whole_dict_values_in_the_seed_template(
    service: EmbeddingService,
) -> None:
    embedder = LocalEmbedder(service, paths=DEMO_PATHS)

    vectors = class_embeddings(embedder, ["tench, Tinca tinca"], [DEFAULT_TEMPLATE])

    expected = service.embed_texts(["This is a photo of tench, Tinca tinca."]).vectors[0]
    assert vectors[0] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{0: 'tench, Tinca tinca',\n 1: 'goldfish'\n", "not parsable"),  # cut short
        ("{0: 'tench', 2: 'goldfish'}\n", "keys must be the integers 0..1"),
        ("{0: 'tench', 1: 7}\n", "class 1 is not a non-empty string"),
        ("{0: 'tench', 1: __import__('os').getcwd()}\n", "not parsable"),  # never executed
        ("tench\ngoldfish\n", "for one class name per line pass --classes-format lines"),
        ("['tench', 'goldfish']\n", "not a non-empty dict"),
    ],
)
def test_a_class_file_that_cannot_be_parsed_is_refused_not_read_as_lines(
    seed_files: Path, content: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (seed_files / "bad_classes.txt").write_text(content)

    status = seed_zero_shot(seed_files, classes="bad_classes.txt")

    assert status == 2
    assert message in capsys.readouterr().err


def test_one_name_per_line_is_read_when_asked_for(
    seed_files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (seed_files / "classes.txt").write_text("\n".join(CLASSES) + "\n")

    status = seed_zero_shot(seed_files, "--classes-format", "lines", classes="classes.txt")

    assert status == 0
    assert "top-1 62.50%" in capsys.readouterr().out


def test_keyed_labels_need_keyed_images(
    seed_files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = seed_zero_shot(seed_files, images="images.npy")

    assert status == 2
    assert "--image-ids" in capsys.readouterr().err


def test_an_image_without_a_label_is_refused(
    seed_files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (seed_files / "val_label.txt").write_text(f"{_name(1)} 0\n")

    status = seed_zero_shot(seed_files)

    assert status == 2
    assert "7 image(s) have no label, e.g. 'ILSVRC2012_val_00000002'" in capsys.readouterr().err
