"""A body refused by its count costs little: 6 MiB of empty strings, ``{"input": ["", ...]}``
(2.1 million values), is a 413 and grows peak RSS by at most 100 MiB, on `serve` and through
the Lambda handler (`benchmarks/count_memory.py`, each leg in a fresh process; 370 and
378 MiB before the count read the body in windows)."""

from __future__ import annotations

import pytest

from benchmarks.count_memory import through_lambda, through_serve

MIB = 1024 * 1024


@pytest.mark.slow
@pytest.mark.parametrize("where", ["serve", "lambda"])
@pytest.mark.parametrize("route", ["/v1/embeddings", "/tokenize"])
def test_six_mib_of_empty_strings_is_a_413_that_grows_peak_memory_by_under_100_mib(
    where: str, route: str
) -> None:
    leg = through_serve if where == "serve" else through_lambda
    record = leg("empty strings", route)
    print(record)
    assert record["status"] == 413, record
    assert isinstance(record["growth_mib"], float) and record["growth_mib"] < 100, record
