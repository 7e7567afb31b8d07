"""The README's marked code blocks: each ``<!-- snippet: NAME -->`` (or ``output:``) line is
followed by one fenced block, which tests run (or compare with what the code printed), so
the README cannot drift from what is tested."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
#: The base URL the README's snippets use; tests swap in their live server's.
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

    def against(self, base_url: str) -> str:
        """The code with the README's base URL replaced by ``base_url``."""
        assert README_BASE_URL in self.code, f"{self.name}: does not use {README_BASE_URL}"
        return self.code.replace(README_BASE_URL, base_url)


def blocks(kind: str) -> dict[str, Block]:
    found: dict[str, Block] = {}
    for match in _BLOCK.finditer(README.read_text(encoding="utf-8")):
        if match["kind"] == kind:
            assert match["name"] not in found, f"README: two {kind} blocks named {match['name']}"
            found[match["name"]] = Block(kind, match["name"], match["lang"], match["code"])
    return found


def snippet(name: str) -> Block:
    return blocks("snippet")[name]


def output(name: str) -> Block:
    return blocks("output")[name]
