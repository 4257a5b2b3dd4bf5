"""A baseline captured from several series carries their spread: stored with the baseline
series, it judges a later series against that baseline ahead of the class calibration and
the uncalibrated default, at its upper bound and never under the floor; a baseline of one
series has none and says which level judged instead."""

from __future__ import annotations

import math

from tests.results.series import AddSeries
from vgpu.results.stats.noise import (
    BASELINE_SERIES_FLOOR,
    DEFAULT_SERIES_CV,
    FROM_BASELINE,
    FROM_DEFAULT,
    bound_of_mean_squares,
    estimate_levels,
)
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SYSTEM_THROUGHPUT, SeriesData, load_series, series_of_run
from vgpu.results.verdict.judge import compare_series
from vgpu.results.verdict.noise_store import levels_against, store_baseline_spread


def _series(store: ResultStore, add_series: AddSeries, level: float,
            spread: float = 0.003) -> SeriesData:
    runs = add_series([{"a": level}, {"a": level * (1 + spread)}, {"a": level * (1 - spread)}])
    return load_series(store, series_of_run(store, runs[0]))


def test_the_spread_of_three_series_judges_a_later_series_at_its_upper_bound(
        store: ResultStore, add_series: AddSeries) -> None:
    members = [_series(store, add_series, level) for level in (1000.0, 1015.0, 990.0)]
    baseline = members[-1]
    stored = store_baseline_spread(store, baseline, members)
    expected = estimate_levels([m.samples[SYSTEM_THROUGHPUT].values for m in members])
    assert stored is not None and stored.origin == FROM_BASELINE
    assert (stored.series, stored.repeats) == (3, 9)
    assert math.isclose(stored.series_cv, expected.series_cv, rel_tol=1e-9)
    assert math.isclose(stored.series_df, expected.series_df, rel_tol=1e-9)
    n0 = 3.0
    msw = expected.repeat_cv**2
    bound = math.sqrt(bound_of_mean_squares(msw + n0 * expected.series_cv**2, msw, 3, 9))
    assert bound > BASELINE_SERIES_FLOOR and math.isclose(stored.judged_series_cv, bound)

    later = _series(store, add_series, 1000.0)
    levels = levels_against(store, later, baseline)
    assert levels.origin == FROM_BASELINE
    assert math.isclose(levels.judged_series_cv, bound)
    comparison = compare_series("run-vs-baseline", later, baseline, tolerance=0.02,
                                levels=levels)
    [check] = [c for c in comparison.checks if c.metric == SYSTEM_THROUGHPUT]
    assert check.noise is not None
    assert f"series level {bound * 100:.2f}% from this baseline's 3 series" in check.noise
    # another baseline's spread judges nothing but comparisons with that baseline
    assert levels_against(store, later, members[0]).origin == FROM_DEFAULT


def test_series_that_agree_exactly_are_judged_at_the_floor_not_at_zero(
        store: ResultStore, add_series: AddSeries) -> None:
    members = [_series(store, add_series, 1000.0) for _ in range(3)]
    stored = store_baseline_spread(store, members[-1], members)
    assert stored is not None and stored.series_cv == 0.0
    assert stored.judged_series_cv == BASELINE_SERIES_FLOOR


def test_a_baseline_of_one_series_falls_back_and_says_so(
        store: ResultStore, add_series: AddSeries) -> None:
    [only] = [_series(store, add_series, 1000.0)]
    assert store_baseline_spread(store, only, [only]) is None
    later = _series(store, add_series, 1000.0)
    levels = levels_against(store, later, only)
    assert levels.origin == FROM_DEFAULT and levels.judged_series_cv == DEFAULT_SERIES_CV
    assert levels.judged_by == "uncalibrated default 2.0%"
    check = compare_series("run-vs-baseline", later, only, tolerance=0.02,
                           levels=levels).checks[0]
    assert check.noise is not None and check.noise.startswith("uncalibrated default 2.0%")
