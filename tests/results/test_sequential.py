"""Sequential repeats (vgpu/results/sequential.py): looks, Stein planning, the budget, and
a small run of benchmarks/verdict_power.py's simulation through the real decision code."""

from __future__ import annotations

import math
import random
from functools import lru_cache

import pytest

import vgpu.results.compare as compare_module
import vgpu.results.stats as stats_module
from benchmarks.verdict_power import (
    BAND,
    DIFFERENCES_PCT,
    fixed,
    sequential,
    simulate,
)
from vgpu.results.compare import Band, compare_samples
from vgpu.results.sequential import (
    Design,
    Pilot,
    budget_total,
    check_ci,
    decide,
    edge_distance_pct,
    expectation,
    look,
    plan_repeats,
)

THROUGHPUT_BAND = Band(lower_pct=-2.0)
REFERENCE = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0, 1008.0, 992.0, 1003.0, 997.0]


def test_check_ci_at_95_percent_is_compare_samples_ci() -> None:
    check = compare_samples("t", [1001.0, 995.0, 1006.0], REFERENCE, THROUGHPUT_BAND)
    assert check.ci_pct is not None
    assert check_ci(check, 0.05) == pytest.approx(check.ci_pct, rel=1e-3)  # df rounded
    low, high = check_ci(check, 0.025) or (0.0, 0.0)
    assert low < check.ci_pct[0] and high > check.ci_pct[1]
    # symmetric on the log-ratio scale, not in percent
    assert math.log1p(low / 100) + math.log1p(high / 100) == pytest.approx(
        2 * math.log1p(check.difference_pct / 100))


def test_a_clear_pass_stops_at_the_pilot() -> None:
    step = decide([1001.0, 999.0, 1000.5], REFERENCE, THROUGHPUT_BAND, index=1)
    assert (step.verdict, step.stop, step.next_total) == ("PASS", True, 3)


def test_a_clear_fail_stops_at_the_pilot() -> None:
    step = decide([900.0, 902.0, 899.0], REFERENCE, THROUGHPUT_BAND, index=1)
    assert (step.verdict, step.stop) == ("FAIL", True)


def test_an_interim_look_needs_the_wider_ci() -> None:
    candidate = [982.0, 992.0, 986.0, 990.0]
    check = compare_samples("t", candidate, REFERENCE, THROUGHPUT_BAND)
    assert check.verdict == "PASS"  # the 95% CI alone would decide
    interim = decide(candidate, REFERENCE, THROUGHPUT_BAND, index=1)
    assert not interim.final and interim.verdict == "INCONCLUSIVE" and not interim.stop
    assert interim.next_total > 4
    last = decide(candidate, REFERENCE, THROUGHPUT_BAND, index=3)
    assert (last.final, last.verdict, last.stop) == (True, "PASS", True)


def test_the_last_look_is_inconclusive_with_the_mdd_reached() -> None:
    candidate = [970.0, 1010.0, 985.0, 1000.0, 975.0]
    step = decide(candidate, REFERENCE, THROUGHPUT_BAND, index=3)
    assert (step.final, step.verdict, step.stop, step.next_total) == (
        True, "INCONCLUSIVE", True, 5)
    assert step.mdd_pct is not None and step.mdd_pct > 0
    assert "minimum detectable difference" in step.describe()


def test_the_cap_makes_a_look_final() -> None:
    step = decide([970.0, 1010.0, 985.0], REFERENCE, THROUGHPUT_BAND, index=1,
                  design=Design(max_repeats=3))
    assert step.final and step.stop


def test_a_pass_blocked_by_invalid_repeats_goes_on() -> None:
    check = compare_samples("t", [1001.0, 999.0, 1000.5], REFERENCE, THROUGHPUT_BAND)
    step = look([check], 3, 1, Design(), blocked_pass=True)
    assert not step.stop and step.next_total == 4


def test_plan_repeats_grows_with_noise_and_nearness_to_the_edge() -> None:
    quiet_far = plan_repeats([1030.0, 1031.0, 1029.0], REFERENCE, THROUGHPUT_BAND)
    noisy_near = plan_repeats([975.0, 1000.0, 965.0], REFERENCE, THROUGHPUT_BAND, cap=15)
    middle = plan_repeats([985.0, 1000.0, 990.0], REFERENCE, THROUGHPUT_BAND)
    assert quiet_far == 3
    # so near the edge that the reference's own repeats (fixed) keep the margin out of
    # reach: more candidate repeats cannot decide, the plan says so by not growing
    assert noisy_near == 3
    assert middle == 7
    with pytest.raises(ValueError, match="final look"):
        plan_repeats([1.0, 2.0], [1.0, 2.0], THROUGHPUT_BAND, alpha=0.1)


def test_edge_distance() -> None:
    assert edge_distance_pct(0.5, Band(lower_pct=-2.0, upper_pct=3.0)) == 2.5
    assert edge_distance_pct(0.5, Band()) == float("inf")


def test_budget_shares_the_time_left_after_later_pilots() -> None:
    pilot = Pilot("bert-offline", repeats=3, repeat_s=60.0, cv_pct=1.4, tolerance_pct=2.0)
    # 45 min left, one workload after: its pilot keeps 3 min, the rest is halved (21 min).
    assert budget_total(pilot, 45 * 60.0, 1, Design(max_repeats=40)) == 3 + 21
    assert budget_total(pilot, 45 * 60.0, 1, Design(max_repeats=10)) == 10
    assert budget_total(pilot, 60.0, 2, Design()) == 3
    assert expectation(pilot, 6, 24) == "bert-offline: ~6 repeats for a 2% verdict at CV 1.4%"
    assert "expect INCONCLUSIVE" in expectation(pilot, 30, 24)


@pytest.mark.parametrize("cv_pct", [1.0, 3.0])
def test_small_simulation_keeps_error_rates_and_saves_repeats(
    cv_pct: float, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A small version of benchmarks/verdict_power.py (fixed seed, few draws): loose
    bounds on the error rates, fewer repeats than fixed n = 10 where the noise allows."""
    cached = lru_cache(maxsize=None)(stats_module.t_quantile)  # same values, faster
    monkeypatch.setattr(stats_module, "t_quantile", cached)
    monkeypatch.setattr(compare_module, "t_quantile", cached)
    rng = random.Random(7)
    draws = 30
    method = sequential(Design())
    cases = [simulate(method, cv_pct, diff, draws, rng, reference_n=10)
             for diff in DIFFERENCES_PCT]
    assert max(c.false_fail for c in cases) <= 0.15
    assert max(c.false_pass for c in cases) <= 0.15
    clear = [c for c in cases if c.difference_pct >= 1.0]
    if cv_pct == 1.0:
        assert all(c.inconclusive == 0.0 for c in clear)
        assert sum(c.mean_repeats for c in clear) / len(clear) < 5
    ten = simulate(fixed(10), cv_pct, 4.0, draws, rng, reference_n=10)
    assert ten.mean_repeats == 10 and ten.false_fail == 0.0
    assert BAND.lower_pct == -2.0
