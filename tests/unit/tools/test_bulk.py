"""The bulk writer's parts (tools/bulk.py): resumable outputs, Retry-After, the batch size."""

from __future__ import annotations

import email.utils
import json
from pathlib import Path

import numpy as np
import pytest
from siglip_text.cli import main
from siglip_text.engine.service import EmbeddingService
from siglip_text.tools.bulk import (
    RETRY_AFTER_MAX_SECONDS,
    Endpoint,
    JsonlOutput,
    NpyOutput,
    RunRecord,
    input_digest,
    retry_after,
)
from siglip_text.tools.embed import batch_size_for
from siglip_text.tools.exit_status import ToolError

TEXTS = [f"a red block number {i}" for i in range(10)]


def embed_demo(source: Path, out: Path, *extra: str) -> int:
    return main(["embed", str(source), "--out", str(out), "--demo", "--threads", "1", *extra])


def texts_file(tmp_path: Path) -> tuple[Path, Path]:
    """`TEXTS` one a line in ``t.txt``, and where their vectors go, ``o.jsonl``."""
    source, out = tmp_path / "t.txt", tmp_path / "o.jsonl"
    source.write_text("\n".join(TEXTS) + "\n")
    return source, out


def embedded_in_threes(tmp_path: Path) -> tuple[Path, Path]:
    """`texts_file`, embedded by the command in batches of 3 (which must succeed)."""
    source, out = texts_file(tmp_path)
    assert embed_demo(source, out, "--batch-size", "3", "--quiet") == 0
    return source, out


def record_for(out: Path, digest: str = "a", model: str = "m", dimension: int = 8) -> RunRecord:
    described = {"input_sha256": digest, "model": model, "dimension": dimension}
    return RunRecord(out, described)


def test_a_cut_last_line_is_dropped_and_the_run_resumes_after_the_whole_ones(
    tmp_path: Path, service: EmbeddingService
) -> None:
    source, out = embedded_in_threes(tmp_path)
    complete = out.read_bytes()
    lines = complete.split(b"\n")
    # GIVEN an unfinished run killed while writing line 5 (its record still there)
    rows = [{"text": t} for t in TEXTS]
    record = record_for(out, digest=input_digest(rows), dimension=service.dimension)
    JsonlOutput(out, rows, record=record, dimension=service.dimension, restart=True).close()
    out.write_bytes(b"\n".join(lines[:4]) + b"\n" + lines[4][:25])

    output = JsonlOutput(out, rows, record=record, dimension=service.dimension, restart=False)
    output.close()

    assert output.done == 4
    assert out.read_bytes() == b"\n".join(lines[:4]) + b"\n"  # the cut line is gone


def test_the_command_resumes_an_unfinished_jsonl_and_removes_its_record(
    tmp_path: Path, service: EmbeddingService
) -> None:
    source, out = embedded_in_threes(tmp_path)
    lines = out.read_bytes().split(b"\n")
    record = out.with_name("o.jsonl.partial.json")
    assert not record.exists()  # finished
    # GIVEN the state a run killed while writing line 5 leaves
    assert embed_demo(source, out, "--batch-size", "3", "--quiet", "--restart") == 0
    described = {
        "inputs": len(TEXTS),
        "input_sha256": input_digest([{"text": t} for t in TEXTS]),
        "text_field": None,
        "model": service.model_id,
        "dimension": service.dimension,
    }
    record.write_text(json.dumps(described))
    out.write_bytes(b"\n".join(lines[:4]) + b"\n" + lines[4][:25])

    assert embed_demo(source, out, "--batch-size", "3", "--quiet") == 0

    vectors = [json.loads(line)["embedding"] for line in out.read_text().split("\n")[:-1]]
    np.testing.assert_allclose(vectors, service.embed_texts(TEXTS).vectors, atol=1e-6)
    assert not record.exists()


def test_an_unfinished_output_of_other_work_is_refused_and_restart_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = texts_file(tmp_path)
    record = out.with_name("o.jsonl.partial.json")
    record.write_text(json.dumps({"inputs": 3, "input_sha256": "x"}))
    out.write_text('{"text": "another input", "embedding": [0.5]}\n')

    assert embed_demo(source, out, "--quiet") == 2
    assert "unfinished run of another input" in capsys.readouterr().err

    assert embed_demo(source, out, "--quiet", "--restart") == 0
    assert json.loads(out.read_text().split("\n")[0])["text"] == TEXTS[0]
    assert not record.exists()


def test_a_finished_output_is_written_again_never_mixed(tmp_path: Path) -> None:
    source, out = texts_file(tmp_path)
    assert embed_demo(source, out, "--quiet") == 0
    source.write_text("\n".join(reversed(TEXTS)) + "\n")

    assert embed_demo(source, out, "--quiet") == 0

    assert [json.loads(x)["text"] for x in out.read_text().split("\n")[:-1]] == TEXTS[::-1]


def test_npy_rows_of_another_run_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "o.npy"
    first = NpyOutput(out, record=record_for(out), count=4, dimension=8, restart=False)
    first.append(0, np.ones((2, 8), dtype=np.float32))
    first.close()

    with pytest.raises(ToolError, match="another input, model or dimension"):
        NpyOutput(out, record=record_for(out, digest="b"), count=4, dimension=8, restart=False)
    resumed = NpyOutput(out, record=record_for(out), count=4, dimension=8, restart=False)
    assert resumed.done == 2
    resumed.append(2, np.zeros((2, 8), dtype=np.float32))
    resumed.finish()
    np.testing.assert_array_equal(np.load(out)[:2], np.ones((2, 8)))
    assert not list(tmp_path.glob("*.partial*"))


def test_concurrency_in_process_is_refused(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text("a\n")

    assert embed_demo(tmp_path / "t.txt", tmp_path / "o.npy", "--concurrency", "4") == 2


def test_retry_after_reads_seconds_and_http_dates_and_is_bounded() -> None:
    now = 1_000_000.0
    in_five = email.utils.formatdate(now + 5, usegmt=True)

    assert retry_after("3") == 3.0
    assert retry_after(in_five, now=now) == pytest.approx(5.0)
    assert retry_after("86400") == RETRY_AFTER_MAX_SECONDS
    assert retry_after(None) is None and retry_after("soon") is None


def test_the_batch_size_follows_the_servers_bound() -> None:
    assert batch_size_for(None, 150) == 150
    assert batch_size_for(None, 2048) == 256
    assert batch_size_for(None, None) == 32
    assert batch_size_for(7, 150) == 7


@pytest.mark.parametrize(
    "url", ["http://h:8000", "http://h:8000/", "http://h:8000/v1", "http://h:8000/v1/"]
)
def test_the_url_is_taken_with_or_without_v1(url: str) -> None:
    assert Endpoint(url, api_key=None).base == "http://h:8000"
