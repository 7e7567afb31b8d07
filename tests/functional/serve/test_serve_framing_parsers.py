"""One answer per framing case under both of uvicorn's parsers: each request of
`devkit.framing_cases` (followed by a second request) sent to `serve` under h11 and
under httptools, the answers compared. Where they differ the case is listed in
`PARSER_DIFFERENCES` with both answers, and docs/api.md says why the difference is harmless."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from siglip_text.assembly import Platform, build_app
from siglip_text.engine.service import EmbeddingService
from siglip_text.settings import Settings

from devkit.framing_cases import FRAMING_CASES, PARSER_DIFFERENCES, SECOND
from devkit.guarded_server import Exchange, exchange, guarded_server, needs_httptools

pytestmark = needs_httptools("the comparison needs both parsers")


@pytest.fixture(scope="module")
def ports(service: EmbeddingService, settings: Settings) -> Iterator[dict[str, int]]:
    app = build_app(service, settings, Platform.SERVE, host="127.0.0.1")
    with guarded_server(app, "h11") as h11, guarded_server(app, "httptools") as httptools:
        yield {"h11": h11, "httptools": httptools}


def summary(got: Exchange) -> str:
    """The answers' statuses in order, ``closed`` if the server closed the connection, ``-``
    for none in time."""
    statuses = " ".join(str(a.status) for a in got.answers) or "-"
    return statuses + (" closed" if got.closed else "")


def test_the_table_has_the_cases_the_docs_name() -> None:
    assert len(FRAMING_CASES) >= 60
    assert set(PARSER_DIFFERENCES) <= set(FRAMING_CASES)


@pytest.mark.parametrize("case", sorted(FRAMING_CASES))
def test_each_framing_case_gets_the_same_answer_under_both_parsers(
    ports: dict[str, int], case: str
) -> None:
    raw = FRAMING_CASES[case] + SECOND
    answers = tuple(summary(exchange(ports[p], raw, timeout=2.5)) for p in ("h11", "httptools"))
    expected = PARSER_DIFFERENCES.get(case, (answers[0], answers[0]))
    assert answers == expected, f"{case}: h11 {answers[0]!r}, httptools {answers[1]!r}"
