from __future__ import annotations

import math

import pytest

from vgpu.results.stats.intervals import (
    difference_interval,
    minimum_detectable_difference,
    summarize,
    system_totals,
    t_cdf,
    t_quantile,
)


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        (0.975, 1, 12.7062),  # published two-sided 95% t table values
        (0.975, 2, 4.3027),
        (0.975, 4, 2.7764),
        (0.975, 10, 2.2281),
        (0.975, 30, 2.0423),
        (0.80, 4, 0.9410),
        (0.80, 10, 0.8791),
        (0.995, 5, 4.0321),
    ],
)
def test_t_quantile_matches_the_published_table(p: float, df: int, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=1e-4)


def test_t_quantile_tends_to_the_normal_and_is_symmetric() -> None:
    assert t_quantile(0.975, 1e7) == pytest.approx(1.959964, abs=1e-5)
    assert t_quantile(0.025, 7) == pytest.approx(-t_quantile(0.975, 7))
    assert t_cdf(t_quantile(0.9, 3.5), 3.5) == pytest.approx(0.9, abs=1e-10)


def test_t_quantile_rejects_impossible_probabilities() -> None:
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


def test_summary_of_three_repeats() -> None:
    s = summarize([10.0, 11.0, 12.0])
    assert s.n == 3
    assert s.mean == pytest.approx(11.0)
    assert s.stdev == pytest.approx(1.0)
    assert s.half_width == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert (s.ci_low, s.ci_high) == pytest.approx((11 - s.half_width, 11 + s.half_width))
    # two-sample MDD, df = 4: (2.7764 + 0.9410) * 1 * sqrt(2/3)
    assert s.mdd == pytest.approx((2.776445 + 0.940965) * math.sqrt(2 / 3), rel=1e-5)


def test_one_repeat_has_no_noise_estimate() -> None:
    s = summarize([42.0])
    assert (s.mean, s.stdev, s.half_width, s.mdd, s.ci_low) == (42.0, None, None, None, None)
    with pytest.raises(ValueError):
        minimum_detectable_difference(1.0, 1)
    with pytest.raises(ValueError):
        summarize([])


def test_system_totals_sum_instances_per_repeat() -> None:
    totals = system_totals({"a": [1.0, 2.0, 3.0], "b": [10.0, 20.0, 30.0]})
    assert totals == [11.0, 22.0, 33.0]
    with pytest.raises(ValueError, match="different repeat counts"):
        system_totals({"a": [1.0], "b": [1.0, 2.0]})


def test_welch_interval_of_equal_variance_samples() -> None:
    a = summarize([10.0, 11.0, 12.0])
    b = summarize([8.0, 9.0, 10.0])
    interval = difference_interval(a, b)
    assert interval.difference == pytest.approx(2.0)
    assert interval.df == pytest.approx(4.0)
    se = math.sqrt(1 / 3 + 1 / 3)
    assert interval.half_width == pytest.approx(2.776445 * se, rel=1e-5)
