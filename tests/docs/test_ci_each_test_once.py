"""CI's last run and its check (.ci/skipped_tests.sh, devkit/outcomes.py): what the README's
run did not run is selected, and CI fails when a test ran twice, never ran, or skipped in
the README's run without declaring what it needs."""

from __future__ import annotations

from typing import Any

from devkit.outcomes import not_run, problems

A, B, C = "tests/x/test_a.py::test_a", "tests/x/test_b.py::test_b", "tests/x/test_c.py::test_c"


def record(collected: dict[str, list[str]], outcomes: dict[str, str]) -> dict[str, Any]:
    return {
        "collected": collected,
        "outcomes": {i: {"outcome": o, "reason": "why"} for i, o in outcomes.items()},
    }


FULL = record({A: [], B: ["docker"], C: []}, {})


def test_the_last_run_selects_what_the_readme_skipped_and_what_it_never_collected() -> None:
    readme = record({A: [], B: ["docker"]}, {A: "passed", B: "skipped"})
    assert not_run(FULL, readme) == [B, C]


def test_each_test_once_passes_with_no_problem() -> None:
    readme = record({A: [], B: ["docker"]}, {A: "passed", B: "skipped"})
    last = record({}, {B: "passed", C: "failed"})
    assert problems(FULL, readme, last) == []


def test_a_test_both_runs_ran_is_named() -> None:
    readme = record({A: [], B: ["docker"], C: []}, {A: "passed", B: "skipped", C: "passed"})
    last = record({}, {B: "passed", C: "passed"})
    assert problems(FULL, readme, last) == [f"RAN TWICE: {C}"]


def test_a_test_neither_run_ran_is_named_with_its_reason() -> None:
    readme = record({A: [], B: ["docker"], C: []}, {A: "passed", B: "skipped", C: "passed"})
    last = record({}, {B: "skipped"})
    assert problems(FULL, readme, last) == [f"NEVER RAN: {B} (why)"]


def test_a_skip_without_a_declared_need_is_named() -> None:
    readme = record({A: [], B: ["docker"], C: []}, {A: "skipped", B: "skipped", C: "passed"})
    last = record({}, {A: "passed", B: "passed"})
    (problem,) = problems(FULL, readme, last)
    assert problem.startswith(f"UNDECLARED SKIP: {A}")


def test_a_module_skipped_as_a_whole_counts_for_its_tests_and_never_running_is_named() -> None:
    module = "tests/x/test_b.py"
    readme = record({A: [], C: []}, {A: "passed", C: "passed", module: "skipped"})
    assert not_run(FULL, readme) == [module]
    # its tests ran in the last run: no problem; the module skipped again: named
    assert problems(FULL, readme, record({}, {B: "passed"})) == []
    assert problems(FULL, readme, record({}, {module: "skipped"})) == [
        f"NEVER RAN: {B} (why)",
        f"NEVER RAN: {module} (all of it: why)",
    ]
