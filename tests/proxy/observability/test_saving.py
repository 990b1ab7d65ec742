"""The time-saved estimate's arithmetic (proxy/observability/querylog/saving.py): the
median of a shape's base-table runs, each scaled by the base tables' rows now over their
rows then, minus the answer's own time; unknown rows leave a run unscaled; no run at all
is "not measured yet" (None), never 0."""
from __future__ import annotations

import pytest

from proxy.observability.querylog.saving import estimate, scaled


def test_a_run_scales_with_the_base_tables_rows():
    assert scaled(2.0, 1_000_000, 3_000_000) == pytest.approx(6.0)    # the table tripled
    assert scaled(2.0, 4_000, 1_000) == pytest.approx(0.5)            # most rows deleted
    assert scaled(2.0, 1_000, 1_000) == 2.0


@pytest.mark.parametrize("then, now", [(None, 3_000), (3_000, None), (None, None), (0, 10)])
def test_unknown_rows_leave_a_run_as_it_was(then, now):
    assert scaled(2.0, then, now) == 2.0


def test_the_estimate_is_the_scaled_median_minus_the_answer():
    # runs of 1 s at 1M rows, 4 s at 2M, 9 s at 3M; 3M rows now: 3, 6, 9 -> median 6
    samples = [(1.0, 1_000_000), (4.0, 2_000_000), (9.0, 3_000_000)]
    assert estimate(samples, 3_000_000, 0.25) == pytest.approx(5.75)
    assert estimate(samples, None, 0.25) == pytest.approx(3.75)      # unscaled: median 4
    assert estimate([(1.0, None), (3.0, 1_000)], 2_000, 0.0) == pytest.approx(3.5)


def test_an_answer_slower_than_its_shape_saved_nothing_and_no_run_is_unknown():
    assert estimate([(1.0, 100)], 100, 2.5) == 0.0
    assert estimate([], 100, 0.1) is None
