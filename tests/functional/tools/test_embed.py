"""`siglip-text embed`: a text file or JSONL in, .npy or JSONL out, row i = input i."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from siglip_text.cli import main
from siglip_text.engine.service import EmbeddingService

TEXTS = ["a photo of a cat", "", "A Photo Of A CAT", "一只猫的照片", "café\tcrème"]


def _embed(*args: str) -> int:
    return main(["embed", *args, "--demo", "--threads", "1", "--batch-size", "2"])


def test_text_file_to_npy_gives_the_served_vectors_in_line_order(
    tmp_path: Path, service: EmbeddingService, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(TEXTS) + "\n")

    assert _embed(str(source), "--out", str(tmp_path / "vectors.npy")) == 0

    vectors = np.load(tmp_path / "vectors.npy")
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 32)
    np.testing.assert_allclose(vectors, service.embed_texts(TEXTS).vectors, atol=1e-6)
    captured = capsys.readouterr()
    assert "5/5" in captured.err  # the progress line
    assert "wrote 5 x 32 vectors" in captured.out


def test_jsonl_round_trip_keeps_each_record_and_adds_its_embedding(
    tmp_path: Path, service: EmbeddingService
) -> None:
    source = tmp_path / "in.jsonl"
    records = [{"id": i, "caption": text} for i, text in enumerate(TEXTS)]
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))

    status = _embed(str(source), "--out", str(tmp_path / "out.jsonl"), "--text-field", "caption")

    assert status == 0
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [{k: v for k, v in r.items() if k != "embedding"} for r in out] == records
    np.testing.assert_allclose(
        np.asarray([r["embedding"] for r in out]),
        service.embed_texts(TEXTS).vectors,
        atol=1e-6,
    )


@pytest.mark.parametrize(
    ("source", "content", "out", "said"),
    [
        ("texts.txt", "a\n", "out.csv", "must end in .npy or .jsonl"),
        ("in.jsonl", '{"text": "a"}\n{"caption": "b"}\n', "o.npy", "record 2 has no string field"),
    ],
    ids=["output-neither-npy-nor-jsonl", "record-without-text"],
)
def test_embed_refuses_what_it_cannot_read_or_write_naming_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    source: str,
    content: str,
    out: str,
    said: str,
) -> None:
    (tmp_path / source).write_text(content)

    assert _embed(str(tmp_path / source), "--out", str(tmp_path / out)) == 2
    assert said in capsys.readouterr().err


def test_embed_through_a_live_endpoint_gives_the_in_process_vectors(
    live_server: str, tmp_path: Path, service: EmbeddingService
) -> None:
    pytest.importorskip("openai", reason="--url needs the openai client")
    texts = TEXTS  # the empty text included: this endpoint embeds it (<eos> then pads)
    assert "" in texts
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")

    status = main(
        [
            "embed",
            str(tmp_path / "texts.txt"),
            "--out",
            str(tmp_path / "vectors.npy"),
            "--url",
            f"{live_server}/v1",
            "--quiet",
        ]
    )

    assert status == 0
    np.testing.assert_allclose(
        np.load(tmp_path / "vectors.npy"), service.embed_texts(texts).vectors, atol=1e-6
    )
