"""Each test once in CI: what a pytest run collected, ran and skipped, written where
``TEST_OUTCOMES`` names (a pytest plugin, loaded by tests/conftest.py), and the check that the
README's run and CI's last run together ran every test exactly once.

The variable is not a ``SIGLIP_`` one, so that it reaches the README's block, which CI runs
as written with every ``SIGLIP_`` variable removed; without it the plugin does nothing.

    python -m devkit.outcomes select collected.json readme.json > skipped.args
    python -m pytest @skipped.args
    python -m devkit.outcomes check collected.json readme.json rest.json
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

#: the markers that declare what a test needs beyond the README's install (tests/README.md)
NEEDS = ("export", "docker", "emulation", "clients", "node", "gemma", "sam_cli", "httptools")
VARIABLE = "TEST_OUTCOMES"


class Recorder:
    """Collected node ids with their ``NEEDS`` markers, and each one's outcome."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.collected: dict[str, list[str]] = {}
        self.outcomes: dict[str, dict[str, str]] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            needs = [name for name in NEEDS if item.get_closest_marker(name) is not None]
            self.collected[item.nodeid] = needs

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # a module that skips as a whole (pytest.skip(allow_module_level=True),
        # importorskip) has no test ids: its path stands for them
        if report.skipped:
            self.outcomes[report.nodeid] = {"outcome": "skipped", "reason": _reason(report)}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.outcomes.setdefault(report.nodeid, {"outcome": "passed", "reason": ""})
        if report.skipped and not hasattr(report, "wasxfail"):
            entry.update(outcome="skipped", reason=_reason(report))
        elif report.failed and entry["outcome"] != "skipped":
            entry["outcome"] = "failed"

    def pytest_sessionfinish(self) -> None:
        self.target.parent.mkdir(parents=True, exist_ok=True)
        data = {"collected": self.collected, "outcomes": self.outcomes}
        self.target.write_text(json.dumps(data, indent=1), encoding="utf-8")


def _reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_configure(config: pytest.Config) -> None:
    target = os.environ.get(VARIABLE)
    if target:
        config.pluginmanager.register(Recorder(Path(target).resolve()), "test-outcomes")


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def skipped(run: dict[str, Any]) -> list[str]:
    """The node ids (or module paths) a run skipped."""
    return sorted(i for i, e in run["outcomes"].items() if e["outcome"] == "skipped")


def not_run(collected: dict[str, Any], readme: dict[str, Any]) -> list[str]:
    """What the README's run did not run: what it skipped, and the tests collected here that
    it did not collect (ids made from what only the full environment has)."""
    first = skipped(readme)
    unseen = [
        nodeid
        for nodeid in collected["collected"]
        if nodeid not in readme["collected"] and not any(covers(s, nodeid) for s in first)
    ]
    return sorted([*first, *unseen])


def covers(selected: str, nodeid: str) -> bool:
    """Whether selecting `selected` (a node id or a module path) runs `nodeid`."""
    return nodeid == selected or nodeid.startswith(f"{selected}::")


def problems(collected: dict[str, Any], readme: dict[str, Any], rest: dict[str, Any]) -> list[str]:
    """What breaks "each test once": a test both runs ran, one neither ran, a test the
    README's run skipped that declares no need, a test selected twice."""
    found = []
    ran = {
        run_name: {i for i, e in run["outcomes"].items() if e["outcome"] != "skipped"}
        for run_name, run in (("the README's run", readme), ("the last run", rest))
    }
    skipped_first = skipped(readme)
    for nodeid in sorted(collected["collected"]):
        runs = [name for name, ids in ran.items() if nodeid in ids]
        if len(runs) > 1:
            found.append(f"RAN TWICE: {nodeid}")
        elif not runs:
            reason = rest["outcomes"].get(nodeid, {}).get("reason") or next(
                (readme["outcomes"][s]["reason"] for s in skipped_first if covers(s, nodeid)),
                "in neither run",
            )
            found.append(f"NEVER RAN: {nodeid} ({reason})")
        if any(covers(s, nodeid) for s in skipped_first) and not collected["collected"][nodeid]:
            found.append(
                f"UNDECLARED SKIP: {nodeid} skipped in the README's run and has none of "
                f"the markers {', '.join(NEEDS)} (tests/README.md)"
            )
    # a module that skipped as a whole in the full environment has no ids to count: its path
    skipped_modules = {
        nodeid: entry["reason"]
        for run in (collected, rest)
        for nodeid, entry in run["outcomes"].items()
        if "::" not in nodeid and entry["outcome"] == "skipped"
    }
    found += [f"NEVER RAN: {m} (all of it: {why})" for m, why in sorted(skipped_modules.items())]
    return found


def main(argv: list[str]) -> int:
    if argv[:1] == ["select"] and len(argv) == 3:
        print("\n".join(not_run(load(Path(argv[1])), load(Path(argv[2])))))
        return 0
    if argv[:1] == ["check"] and len(argv) == 4:
        collected, readme, rest = (load(Path(p)) for p in argv[1:])
        found = problems(collected, readme, rest)
        first = sum(e["outcome"] != "skipped" for e in readme["outcomes"].values())
        last = sum(e["outcome"] != "skipped" for e in rest["outcomes"].values())
        print(
            f"{len(collected['collected'])} tests collected; the README's run ran {first}, "
            f"skipped {len(skipped(readme))} (ids or modules); the last run ran {last}"
        )
        for line in found:
            print(line, file=sys.stderr)
        return 1 if found else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
