"""Every tool that takes --url works with the base URL given with or without /v1,
against a real `siglip-text serve --demo` on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from siglip_text.cli import main
from siglip_text.engine.service import EmbeddingService

pytest.importorskip("openai", reason="embed, verify and zero-shot --url need the openai client")

TEXTS = ["a photo of a dog at the beach", "a red car on the street", ""]
FORMS = ["bare", "with-v1"]


def _url(live_server: str, form: str) -> str:
    return live_server + ("/v1" if form == "with-v1" else "")


@pytest.mark.parametrize("form", FORMS)
def test_load_test_takes_either_form(live_server: str, form: str, tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    argv = ["load-test", "--url", _url(live_server, form), "--requests", "3"]
    status = main([*argv, "--concurrency", "1", "--warmup", "0", "--json", str(out)])

    summary = json.loads(out.read_text())
    assert status == 0
    assert summary["statuses"] == {"200": 3} and summary["failures"] == {}


@pytest.mark.parametrize("form", FORMS)
def test_embed_takes_either_form(
    live_server: str, form: str, tmp_path: Path, service: EmbeddingService
) -> None:
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "vectors.npy"

    status = main(
        ["embed", str(tmp_path / "texts.txt"), "--out", str(out), "--quiet"]
        + ["--url", _url(live_server, form)]
    )

    assert status == 0
    expected = service.embed_texts(TEXTS).vectors
    assert np.einsum("ij,ij->i", np.load(out), expected) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("form", FORMS)
def test_verify_takes_either_form(
    live_server: str, form: str, tmp_path: Path, service: EmbeddingService
) -> None:
    reference = tmp_path / "reference.jsonl"
    vectors = service.embed_texts(TEXTS).vectors
    reference.write_text(
        "".join(
            json.dumps({"text": t, "embedding": v.tolist()}) + "\n"
            for t, v in zip(TEXTS, vectors, strict=True)
        )
    )

    status = main(
        ["verify", "--reference", str(reference), "--quiet", "--url", _url(live_server, form)]
    )

    assert status == 0


@pytest.mark.parametrize("form", FORMS)
def test_zero_shot_takes_either_form(
    live_server: str,
    form: str,
    tmp_path: Path,
    service: EmbeddingService,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN the seed's files for two classes and one image vector per class
    classes = ["dog", "red car"]
    (tmp_path / "classes.txt").write_text("{0: 'dog', 1: 'red car'}\n")
    (tmp_path / "val_label.txt").write_text("img_1.JPEG 0\nimg_2.JPEG 1\n")
    vectors = service.embed_texts([f"This is a photo of {c}." for c in classes]).vectors
    (tmp_path / "images.jsonl").write_text(
        "".join(
            json.dumps({"id": f"img_{i}", "embedding": v.tolist()}) + "\n"
            for i, v in enumerate(vectors, start=1)
        )
    )

    status = main(
        ["zero-shot", "--classes", str(tmp_path / "classes.txt")]
        + ["--labels", str(tmp_path / "val_label.txt"), "--images", str(tmp_path / "images.jsonl")]
        + ["--url", _url(live_server, form)]
    )

    assert status == 0
    assert "top-1 100.00%" in capsys.readouterr().out
