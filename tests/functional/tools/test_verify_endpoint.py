"""`siglip-text verify --url`: a running server checked through the openai client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from siglip_text.cli import main

from devkit.servers import demo_server

pytest.importorskip("openai", reason="verify --url needs the openai client")


@pytest.fixture(scope="module")
def live_server() -> Iterator[str]:
    """`serve --demo` taking token ids (SIGLIP_TOKEN_ID_INPUTS=accept), so that verify's id
    check runs; the default refuses them (the last test here)."""
    with demo_server(SIGLIP_TOKEN_ID_INPUTS="accept") as base:
        yield base


def _write(path: Path, cases: list[dict[str, Any]]) -> Path:
    path.write_text(
        "".join(
            json.dumps({k: c[k] for k in ("text", "input_ids", "embedding")}) + "\n" for c in cases
        )
    )
    return path


def verify(base: str, refs: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`siglip-text verify --url` against ``base``: its exit status and what it printed."""
    status = main(["verify", "--url", f"{base}/v1", "--reference", str(refs), "--quiet"])
    return status, capsys.readouterr().out


def test_verify_against_a_live_endpoint_passes_on_the_demo_reference(
    live_server: str,
    reference: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    refs = _write(tmp_path / "ref.jsonl", reference["cases"])

    status, out = verify(live_server, refs, capsys)
    assert status == 0, out
    # every text, the empty one included (the contract embeds it: <eos> then pads)
    assert "" in [c["text"] for c in reference["cases"]]
    count = len(reference["cases"])
    assert f"{count}/{count} texts: endpoint vector for the text equals" in out
    assert f"{count} texts: cosine min" in out
    assert "skipped" not in out


def test_verify_against_a_live_endpoint_fails_on_ids_padded_with_1(
    live_server: str,
    reference: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN reference ids from a pipeline that pads with id 1 (short texts only differ)
    cases = [
        {**c, "input_ids": [1 if i == 0 else i for i in c["input_ids"]]}
        for c in reference["cases"][:6]
    ]
    refs = _write(tmp_path / "ref.jsonl", cases)

    status, out = verify(live_server, refs, capsys)
    assert status == 1
    assert "differs from its vector for the reference ids" in out


def test_verify_against_a_live_endpoint_names_a_reference_that_starts_with_bos(
    live_server: str,
    reference: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN reference ids from a tokenizer whose post-processor prepends <bos> (id 2) and
    # appends no <eos>: what transformers 5 makes of a contradictory SigLIP 2 checkpoint
    cases = []
    for c in reference["cases"][:6]:
        content = [i for i in c["input_ids"] if i not in (0, 1)]
        row = [2, *content][:64]
        cases.append({**c, "input_ids": row + [0] * (64 - len(row))})
    refs = _write(tmp_path / "ref.jsonl", cases)

    status, out = verify(live_server, refs, capsys)
    assert status == 1
    assert "likely cause: 6 of 6 reference rows start with <bos> and hold no <eos>" in out
    assert "transformers >= 5" in out


@pytest.mark.slow
def test_verify_against_an_endpoint_refusing_token_ids_checks_the_vectors_only(
    reference: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN an endpoint deployed as template.yaml does (TokenIdInputs=reject)
    refs = _write(tmp_path / "ref.jsonl", reference["cases"])
    with demo_server(SIGLIP_TOKEN_ID_INPUTS="reject") as base:
        # WHEN verify compares it with the reference
        status, out = verify(base, refs, capsys)
    # THEN the id check says it could not run and why; the vectors are still checked
    assert status == 0, out
    assert "not checked: the endpoint refuses token ids" in out
    assert "texts: cosine min" in out
