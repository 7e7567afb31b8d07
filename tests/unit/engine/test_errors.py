"""The engine's errors (engine/errors.py): an exception's message made fit for a log."""

from __future__ import annotations

from siglip_text.engine.errors import scrubbed


def test_scrubbed_keeps_the_first_line_hides_quotes_and_numbers() -> None:
    assert scrubbed("bad 'secret text' idx=42\nsecond line") == "bad <quoted> idx=<n>"
    assert scrubbed("node 'Gather_1' idx=42", keep_quotes=True) == "node 'Gather_1' idx=<n>"
    assert len(scrubbed("x" * 1000)) == 300
