"""The log scrubber (`engine.errors.scrubbed`) removes quoted material however it is quoted:
apostrophes, nested and unbalanced quotes, typographic marks, non-ASCII text."""

from __future__ import annotations

import pytest
from siglip_text.engine.errors import scrubbed

SECRET = "secret"


@pytest.mark.parametrize(
    "message",
    [
        "can't parse 'secret'",
        'can\'t parse "secret"',
        "cannot parse 'secret",
        "cannot parse secret' here 'x'",  # an unbalanced closing mark before a quote
        "bad 'outer \"secret\" outer'",
        "bad \"outer 'secret' outer\"",
        "bad 'it's secret'",
        "bad 'x' then 'secret",
        "bad `secret`",
        "bad \u2018secret\u2019",
        "bad \u201csecret\u201d ok",
        "bad \u00absecret\u00bb",
        "bad \u300csecret\u300d",
        "ne peut pas lire l\u2019entr\u00e9e \u00ab secret \u00bb",
        "can't 'secret'x' ok",
        "'secret'",
        "'",
        '"secret',
    ],
)
def test_no_character_of_the_quoted_text_survives(message: str) -> None:
    # GIVEN a message quoting "secret" (or where it follows a mark that may open a quote)
    # WHEN it is scrubbed
    line = scrubbed(message)
    # THEN no letter of it is left after the first quotation mark (what follows the quotes
    # here has none of its letters)
    first = min(i for i, c in enumerate(message) if c in "'\"`\u2018\u2019\u201c\u00ab\u300c")
    assert line.startswith(message[:first]), line
    assert not any(c in SECRET for c in line[first:].replace("<quoted>", "")), line


def test_text_outside_the_quotes_is_kept() -> None:
    assert scrubbed("bad 'secret text' idx=42\nsecond line") == "bad <quoted> idx=<n>"
    assert scrubbed("can't parse 'secret': no") == "can<quoted>: no"
    assert scrubbed("no quotes here idx=3") == "no quotes here idx=<n>"
    assert scrubbed("\u00e9t\u00e9 \u201cx\u201d fini") == "\u00e9t\u00e9 <quoted> fini"


def test_a_quote_opened_on_the_first_line_and_closed_on_the_next_is_cut() -> None:
    assert scrubbed("bad 'secret\nrest' of it") == "bad <quoted>"


def test_keep_quotes_keeps_them() -> None:
    assert scrubbed("node 'Gather_1' idx=42", keep_quotes=True) == "node 'Gather_1' idx=<n>"
