"""Where the repository's files are."""

from __future__ import annotations

from devkit import ROOT
from devkit.events import EVENTS

FIXTURES = ROOT / "tests" / "fixtures"

__all__ = ["EVENTS", "FIXTURES", "ROOT"]
