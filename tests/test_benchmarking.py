from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from paperports.benchmarking import BenchResult, BenchRow, median_time


def test_median_time_calls_warmup_plus_repeats() -> None:
    calls = []
    t = median_time(lambda: calls.append(1), repeats=3, warmup=2)
    assert len(calls) == 5 and t >= 0


def test_median_time_rejects_no_repeats() -> None:
    with pytest.raises(ValueError, match="repeats"):
        median_time(lambda: None, repeats=0)


def test_table_shows_ratios() -> None:
    res = BenchResult("m", "anchor", [BenchRow("x", 3.0, 2.0, "s", "ratio <= 1")])
    assert res.rows[0].ratio == 1.5
    assert "1.500" in res.table()


def test_paired_median_times_alternate_the_two_sides() -> None:
    from paperports.benchmarking import paired_median_times

    calls: list[str] = []
    fast, slow = paired_median_times(
        lambda: calls.append("a"), lambda: (calls.append("b"), time.sleep(0.002)), repeats=3
    )
    assert calls == ["a", "b"] * 4  # one warm-up pair, then three alternating pairs
    assert slow > fast
    with pytest.raises(ValueError, match="repeats"):
        paired_median_times(lambda: None, lambda: None, repeats=0)


def _allocate(megabytes: int) -> Callable[[], object]:
    """Work for peak_memory_mb: touch ``megabytes`` of fresh memory."""
    import numpy as np

    return lambda: np.ones(megabytes * 2**20, dtype=np.uint8).sum()


def test_peak_memory_measures_the_work_not_the_setup() -> None:
    from paperports.benchmarking import peak_memory_mb

    small, large = peak_memory_mb(_allocate, 8), peak_memory_mb(_allocate, 200)
    assert 150 <= large - small <= 250, (small, large)  # the 192 MB more that the work touches
