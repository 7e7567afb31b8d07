"""The documentation's marked code blocks: in README.md and docs/*.md, each
``<!-- snippet: NAME -->`` (or ``output:``) line is followed by one fenced block, which tests
run (or compare with what the code printed), so the docs cannot drift from what is tested.
A name is unique across all the files."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from devkit.paths import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: The base URL the snippets use; tests swap in their live server's.
README_BASE_URL = "http://127.0.0.1:8000"

_BLOCK = re.compile(
    r"^<!-- (?P<kind>snippet|output): (?P<name>[\w.-]+) -->\n```(?P<lang>\w*)\n(?P<code>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class Block:
    kind: str
    name: str
    lang: str
    code: str
    #: the file it was read from, relative to the repository root
    source: str

    def against(self, base_url: str) -> str:
        """The code with the README's base URL replaced by ``base_url``."""
        assert README_BASE_URL in self.code, f"{self.name}: does not use {README_BASE_URL}"
        return self.code.replace(README_BASE_URL, base_url)


def documents() -> list[Path]:
    """The files whose marked blocks are tested: the README, then docs/*.md."""
    return [README, *sorted(DOCS.glob("*.md"))]


def blocks(kind: str) -> dict[str, Block]:
    found: dict[str, Block] = {}
    for path in documents():
        source = path.relative_to(ROOT).as_posix()
        for match in _BLOCK.finditer(path.read_text(encoding="utf-8")):
            if match["kind"] != kind:
                continue
            name = match["name"]
            assert name not in found, (
                f"two {kind} blocks named {name}: {found[name].source} and {source}"
            )
            found[name] = Block(kind, name, match["lang"], match["code"], source)
    return found


def snippet(name: str) -> Block:
    return blocks("snippet")[name]


def output(name: str) -> Block:
    return blocks("output")[name]


def section(path: Path, heading: str) -> str:
    """The text under ``heading`` (a whole heading line, e.g. ``## Layout``) up to the next
    heading of the same or a higher level."""
    level = heading.split(" ", 1)[0]
    text = path.read_text(encoding="utf-8")
    assert f"\n{heading}\n" in text, f"{path.name}: no heading {heading!r}"
    body = text.split(f"\n{heading}\n", 1)[1]
    ends = [body.find(f"\n{'#' * n} ") for n in range(1, len(level) + 1)]
    ends = [end for end in ends if end >= 0]
    return body[: min(ends)] if ends else body


def table_rows(text: str) -> list[list[str]]:
    """The rows of the first Markdown table in ``text`` (header and rule left out), each a
    list of its cells, stripped."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert len(lines) >= 3 and set(lines[1]) <= set("|-: "), "no Markdown table"
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
