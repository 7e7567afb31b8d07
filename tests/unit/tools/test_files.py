"""JSONL files of the tools: what write_jsonl writes, read_jsonl reads back unchanged."""

from __future__ import annotations

from pathlib import Path

from siglip_text.tools.files import read_jsonl, read_texts, write_jsonl

# characters that str.splitlines() takes as line ends and JSON leaves raw inside strings
SEPARATORS = ["\u2028", "\u2029", "\x85", "\x1c", "\x1d", "\x1e", "\x0b", "\x0c"]


def test_jsonl_round_trip_keeps_texts_with_unicode_line_separators(tmp_path: Path) -> None:
    records = [{"text": f"line{sep}separator", "i": i} for i, sep in enumerate(SEPARATORS)]
    path = tmp_path / "texts.jsonl"

    assert write_jsonl(path, records) == len(records)

    assert read_jsonl(path) == records
    assert read_texts(path)[0] == [r["text"] for r in records]


def test_jsonl_with_crlf_line_ends_is_read(tmp_path: Path) -> None:
    path = tmp_path / "crlf.jsonl"
    path.write_bytes(b'{"text": "a"}\r\n{"text": ""}\r\n')

    assert read_jsonl(path) == [{"text": "a"}, {"text": ""}]
