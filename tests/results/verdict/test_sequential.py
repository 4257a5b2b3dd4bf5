"""Sequential repeats (vgpu/results/verdict/sequential.py): the O'Brien-Fleming-type spending and
its boundaries, a schedule planned from the variance alone, Holm within a look, the
budget; and a small run of benchmarks/verdict_power.py's simulation through the real
decision code."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.results.stats.intervals import t_quantile
from vgpu.results.stats.spending import look_level
from vgpu.results.verdict.compare import (
    Band,
    Check,
    Comparison,
    at_look,
    carry_over,
    compare_paired,
    compare_samples,
    fail_p_value,
    holm,
    holm_kept,
    one_family,
)
from vgpu.results.verdict.sequential import (
    ONE_SIDED_ALPHA,
    Design,
    Pilot,
    boundaries,
    budget_total,
    check_ci,
    decide,
    expectation,
    look,
    nominal_levels,
    plan_repeats,
    schedule,
    spent,
    with_schedule,
)

THROUGHPUT_BAND = Band(lower_pct=-2.0)
REFERENCE = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0, 1008.0, 992.0, 1003.0, 997.0]


def test_spending_is_obrien_fleming_like_and_spends_all_alpha_at_the_end() -> None:
    assert spent(1.0, 0.025) == pytest.approx(0.025, abs=1e-9)
    assert spent(0.5, 0.025) == pytest.approx(0.00153, abs=2e-5)
    assert spent(1 / 3, 0.025) == pytest.approx(1.035e-4, abs=1e-6)


def test_boundaries_match_the_published_obrien_fleming_values() -> None:
    """Lan-DeMets OBF-type, 3 equally spaced looks, one-sided 2.5% (gsDesign / Jennison
    and Turnbull): 3.710, 2.511, 1.993; one look is the fixed-sample 1.960."""
    assert boundaries((1 / 3, 2 / 3, 1.0), 0.025) == pytest.approx((3.710, 2.511, 1.993),
                                                                    abs=2e-3)
    assert boundaries((0.5, 1.0), 0.025) == pytest.approx((2.963, 1.969), abs=2e-3)
    assert boundaries((1.0,), 0.025) == pytest.approx((1.960,), abs=1e-3)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(2, 40), min_size=1, max_size=4, unique=True))
def test_nominal_levels_never_exceed_alpha(totals: list[int]) -> None:
    """Each look's nominal level is below the one-sided alpha, and the first look spends
    no more than the spending function allows at its time."""
    plan = sorted(totals)
    levels = nominal_levels(plan, ONE_SIDED_ALPHA)
    assert all(0.0 <= p <= ONE_SIDED_ALPHA + 1e-9 for p in levels)
    assert levels[0] == pytest.approx(spent(plan[0] / plan[-1], ONE_SIDED_ALPHA), abs=1e-6)


def test_a_look_cut_short_by_the_budget_spends_the_rest() -> None:
    planned = nominal_levels((4, 8, 12), ONE_SIDED_ALPHA)
    cut = nominal_levels((4, 8, 12), ONE_SIDED_ALPHA, final_at=1)
    assert planned[1] < cut[1] < ONE_SIDED_ALPHA
    assert cut[0] == planned[0]


def test_schedule_is_even_for_abba_blocks() -> None:
    assert schedule(4, 12, Design(step=2, looks=3)) == (4, 8, 12)
    assert schedule(3, 14, Design(step=2, looks=3)) == (4, 10, 14)
    assert schedule(4, 4, Design(step=2)) == (4,)
    assert schedule(4, 40, Design(step=2)) == (4, 10, 16, 22, 28, 34, 40)
    assert all(n % 2 == 0 for n in schedule(4, 17, Design(step=2, looks=4)))


def test_the_schedule_depends_on_the_variance_not_on_the_difference() -> None:
    """Two pilots with the same spread, one 0.5% and one 1.5% below the reference: the
    same planned total (a plan from the observed difference would differ)."""
    near = [v * 0.995 for v in (1000.0, 1010.0, 990.0)]
    far = [v * 0.985 for v in (1000.0, 1010.0, 990.0)]
    assert plan_repeats(near, REFERENCE, THROUGHPUT_BAND) == \
        plan_repeats(far, REFERENCE, THROUGHPUT_BAND)
    quiet = plan_repeats([1000.0, 1001.0, 999.0], REFERENCE, THROUGHPUT_BAND)
    noisy = plan_repeats([1000.0, 1020.0, 980.0], REFERENCE, THROUGHPUT_BAND)
    assert quiet < noisy


def test_check_ci_at_95_percent_is_compare_samples_ci() -> None:
    check = compare_samples("t", [1001.0, 995.0, 1006.0], REFERENCE, THROUGHPUT_BAND)
    assert check.ci_pct is not None
    assert check_ci(check, 0.05) == pytest.approx(check.ci_pct, rel=1e-3)  # df rounded
    low, high = check_ci(check, 0.025) or (0.0, 0.0)
    assert low < check.ci_pct[0] and high > check.ci_pct[1]
    # symmetric on the log-ratio scale, not in percent
    assert math.log1p(low / 100) + math.log1p(high / 100) == pytest.approx(
        2 * math.log1p(check.difference_pct / 100))


def test_a_clear_fail_stops_at_the_pilot() -> None:
    step = decide([700.0, 705.0, 698.0], REFERENCE, THROUGHPUT_BAND, index=1)
    assert (step.verdict, step.stop) == ("FAIL", True)


def test_a_first_look_needs_far_more_than_the_95_percent_ci() -> None:
    candidate = [880.0, 910.0, 895.0]
    check = compare_samples("t", candidate, REFERENCE, THROUGHPUT_BAND)
    assert check.verdict == "FAIL"  # the fixed-sample 95% CI alone would decide
    first = decide(candidate, REFERENCE, THROUGHPUT_BAND, index=1)
    assert (first.verdict, first.stop) == ("INCONCLUSIVE", False)
    assert first.schedule == (3, 6, 9, 12, 15, 18, 20) and first.next_total == 6


def test_the_last_look_says_what_would_decide() -> None:
    candidate = [970.0, 1010.0, 985.0, 1000.0, 975.0]
    design = Design(schedule=(3, 4, 5))
    step = decide(candidate, REFERENCE, THROUGHPUT_BAND, index=3, design=design)
    assert (step.final, step.verdict, step.stop, step.next_total) == (
        True, "INCONCLUSIVE", True, 5)
    assert step.why is not None and "would decide" in step.why
    assert "minimum detectable difference" in step.describe()


def test_the_cap_makes_a_look_final() -> None:
    step = decide([970.0, 1010.0, 985.0], REFERENCE, THROUGHPUT_BAND, index=1,
                  design=Design(max_repeats=3))
    assert step.final and step.stop


def test_a_pass_blocked_by_invalid_repeats_goes_on() -> None:
    check = compare_samples("t", [1001.0, 999.0, 1000.5] * 4, REFERENCE * 2,
                            THROUGHPUT_BAND)
    design = Design(schedule=(12, 16, 20))
    assert look([check], 12, 1, design).verdict == "PASS"
    blocked = look([check], 12, 1, design, blocked_pass=True)
    assert not blocked.stop and blocked.next_total == 16


def test_holm_applies_within_a_look_as_in_the_stored_verdict() -> None:
    """Eight checks, one marginal FAIL at its own level: the look does not FAIL on it,
    just as compare.py's Holm demotes it; a clear FAIL stops the look in both."""
    base = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0, 1004.0, 996.0]
    noise = [0.01, -0.012, 0.004, 0.008, -0.01, 0.0, 0.012, -0.006]
    marginal = compare_paired("m", [v * 0.968 * (1 + e) for v, e in
                                    zip(base, noise, strict=True)], base, THROUGHPUT_BAND)
    others = [compare_paired(f"p{i}", base, base, THROUGHPUT_BAND) for i in range(7)]
    design = Design(schedule=(8,))
    alone = look([marginal], 8, 1, design)
    family = look([marginal, *others], 8, 1, design)
    stored = holm([marginal, *others])
    assert alone.verdict == "FAIL"
    assert family.verdict != "FAIL" and stored[0].verdict != "FAIL"
    clear = compare_paired("c", [v * 0.8 for v in base], base, THROUGHPUT_BAND)
    assert look([clear, *others], 8, 1, design).verdict == "FAIL"


def test_a_disturbed_comparison_stops_and_says_why() -> None:
    check = compare_samples("t", [700.0, 705.0, 698.0], REFERENCE, THROUGHPUT_BAND)
    note = "scenario 6: disturbed: other processes used 63% of the CPU during run 14"
    step = look([check], 3, 1, Design(), disturbed=[note])
    assert (step.verdict, step.stop, step.why) == ("INCONCLUSIVE", True, note)


def test_with_schedule_keeps_the_first_looks_plan() -> None:
    first = decide([880.0, 910.0, 895.0], REFERENCE, THROUGHPUT_BAND, index=1)
    design = with_schedule(Design(), first)
    assert design.schedule == first.schedule
    assert with_schedule(design, first) == design


def test_budget_shares_the_time_left_after_later_pilots() -> None:
    pilot = Pilot("bert-offline", repeats=3, repeat_s=60.0, cv_pct=1.4, tolerance_pct=2.0)
    # 45 min left, one workload after: its pilot keeps 3 min, the rest is halved (21 min).
    assert budget_total(pilot, 45 * 60.0, 1, Design(max_repeats=40)) == 3 + 21
    assert budget_total(pilot, 45 * 60.0, 1, Design(max_repeats=10)) == 10
    assert budget_total(pilot, 60.0, 2, Design()) == 3
    blocks = Pilot("bert-offline", repeats=4, repeat_s=120.0, cv_pct=1.4, tolerance_pct=2.0)
    assert budget_total(blocks, 21 * 60.0, 0, Design(max_repeats=40, step=2)) == 4 + 10
    assert expectation(pilot, 6, 24) == "bert-offline: ~6 repeats for a 2% verdict at CV 1.4%"
    assert "expect INCONCLUSIVE" in expectation(pilot, 30, 24)


@pytest.mark.slow  # about 5 s or more: the whole suite runs it, the quick tier not
def test_small_simulation_holds_the_goals() -> None:
    """A small version of benchmarks/verdict_power.py (fixed seed, few draws): the gate
    as the main job runs it (one check, pilot, fixed looks, set-aside, carry-over) with
    order and warm-up effects: an A/A PASSes, the margin seldom decides either way, -5%
    never PASSes; and a family of 4 checks at -10% FAILs."""
    from benchmarks.verdict_power import Setting, interleaved_rates

    rng = random.Random(5)
    one = Setting(instances=1)
    aa = interleaved_rates(one, 0.0, 60, rng)
    margin = interleaved_rates(one, -2.0, 120, rng)
    slow5 = interleaved_rates(one, -5.0, 40, rng)
    assert aa.fail == 0.0 and aa.passed >= 0.9 and aa.mean_units < 32
    assert margin.passed <= 0.06 and margin.fail <= 0.06
    assert slow5.passed == 0.0 and slow5.fail >= 0.9
    family = interleaved_rates(Setting(), -10.0, 30, rng)
    assert family.fail >= 0.9 and family.passed == 0.0


def test_small_simulation_with_disturbed_vm_runs_holds_the_goals() -> None:
    """6% of the VM's runs 10% slower and marked disturbed (set aside and run again):
    with the allowance for the disturbed share the margin (the true loss, disturbed runs
    included, at -2%) seldom PASSes (10.7% of series did without it), an A/A still
    PASSes, -5% never does (benchmarks/verdict_power.py: 20,000 series a row)."""
    from benchmarks.verdict_power import Setting, interleaved_rates

    rng = random.Random(8)
    disturbed = Setting(instances=1, disturbed_share=0.06)
    margin = interleaved_rates(disturbed, -2.0, 300, rng)
    aa = interleaved_rates(disturbed, 0.0, 150, rng)
    slow5 = interleaved_rates(disturbed, -5.0, 40, rng)
    assert margin.passed <= 0.06 and margin.fail <= 0.06
    assert aa.fail == 0.0 and aa.passed >= 0.85
    assert slow5.passed == 0.0 and slow5.fail >= 0.9


def test_a_first_look_says_how_many_repeats_a_pass_would_need_past_the_cap() -> None:
    noisy = [940.0, 1060.0, 1000.0, 965.0]  # CV about 5%: 2% needs far more than 20
    first = decide(noisy, REFERENCE, THROUGHPUT_BAND, index=1)
    assert first.schedule[-1] == 20 and first.needed is not None and first.needed > 20
    assert first.needed == plan_repeats(noisy, REFERENCE, THROUGHPUT_BAND, cap=10_000)
    assert f"needs about {first.needed}, the budget stops at 20" in first.describe()
    quiet = decide([999.0, 1001.0, 1000.0], REFERENCE, THROUGHPUT_BAND, index=1)
    assert quiet.needed is None and "needs about" not in quiet.describe()


def test_a_passing_gate_without_statistics_does_not_hold_back_a_pass() -> None:
    """The accuracy gate (no interval) PASSes as it stands: the series stops on the
    throughput's PASS; a gate that is not PASS keeps it going."""
    check = compare_samples("t", [1001.0, 999.0, 1000.5] * 4, REFERENCE * 2,
                            THROUGHPUT_BAND)
    gate = replace(check, metric="accuracy", ci_pct=None, mdd_pct=None, se_pct=None,
                   df=None, verdict="PASS")
    design = Design(schedule=(12, 16, 20))
    assert look([check, gate], 12, 1, design).verdict == "PASS"
    held = look([check, replace(gate, verdict="INCONCLUSIVE")], 12, 1, design)
    assert (held.verdict, held.stop) == ("INCONCLUSIVE", False)
    failed = look([check, replace(gate, verdict="FAIL")], 12, 1, design)
    assert (failed.verdict, failed.stop) == ("FAIL", True)


def test_hwang_shih_decani_spending_with_gamma_minus_2() -> None:
    """alpha (1 - exp(-gamma t)) / (1 - exp(-gamma)): 26.9% of the alpha by half time,
    all of it at the end, and less than O'Brien-Fleming's late, more early."""
    assert spent(0.5, 0.025, "hsd") == pytest.approx(0.025 * 0.268941, rel=1e-5)
    assert spent(1.0, 0.025, "hsd") == pytest.approx(0.025)
    assert spent(0.1, 0.025, "hsd") == pytest.approx(0.025 * 0.034655, rel=1e-4)
    assert spent(0.5, 0.025, "hsd") > spent(0.5, 0.025, "obf")
    levels = nominal_levels((4, 10, 16, 22, 28, 34, 40), ONE_SIDED_ALPHA, spending="hsd")
    assert levels[0] == pytest.approx(spent(0.1, ONE_SIDED_ALPHA, "hsd"), rel=1e-6)
    assert all(a < b for a, b in itertools.pairwise(levels))
    assert levels[-1] < ONE_SIDED_ALPHA


def test_the_looks_do_not_depend_on_the_pilots_noise() -> None:
    """A quiet pilot and a noisy one plan the same looks, from the pilot to the cap: a
    pilot whose variance comes out small never makes itself the last look."""
    quiet = decide([999.0, 1001.0, 1000.0, 1000.5], REFERENCE, THROUGHPUT_BAND, index=1,
                   design=Design(max_repeats=40, step=2))
    noisy = decide([940.0, 1060.0, 1000.0, 965.0], REFERENCE, THROUGHPUT_BAND, index=1,
                   design=Design(max_repeats=40, step=2))
    assert quiet.schedule == noisy.schedule == (4, 10, 16, 22, 28, 34, 40)
    assert quiet.level is not None and quiet.level < 0.001
    assert quiet.expected is not None and noisy.expected is not None
    assert quiet.expected < noisy.expected  # what the noise says to expect, in the notes


def test_holm_steps_use_boundaries_recomputed_for_their_share_of_alpha() -> None:
    """The look's boundary at alpha / 2 is not its nominal level at alpha halved."""
    plan = (4, 10, 16, 22, 28, 34, 40)
    whole = nominal_levels(plan, ONE_SIDED_ALPHA, spending="hsd")[1]
    half = nominal_levels(plan, ONE_SIDED_ALPHA / 2, spending="hsd")[1]
    assert half != pytest.approx(whole / 2, rel=0.01)
    p_between = (half + whole / 2) / 2
    def level_at(alpha: float) -> float:
        return look_level(plan, 1, False, alpha, "hsd")

    kept = holm_kept([p_between, p_between], ONE_SIDED_ALPHA, level_at)
    divided = {i for i, p in enumerate([p_between] * 2) if p <= whole / 2}
    assert kept != divided


def _abba(blocks: int, loss: float, switch_into: dict[str, float],
          rng: random.Random) -> tuple[list[float], list[float]]:
    """Paired runs of ``blocks`` ABBA blocks; the second run of a block pays the cost of
    switching into its side (``switch_into``, relative) on top of 0.3% noise."""
    cand, ref = [], []
    for block in range(blocks):
        second = "candidate" if block % 2 == 0 else "reference"
        c = (1 + loss) * (1 + (switch_into["candidate"] if second == "candidate" else 0))
        r = 1 + (switch_into["reference"] if second == "reference" else 0)
        cand.append(1000 * c * math.exp(rng.gauss(0, 0.003)))
        ref.append(1000 * r * math.exp(rng.gauss(0, 0.003)))
    return cand, ref


def test_a_switching_cost_that_differs_between_sides_is_found_and_named() -> None:
    """Switching into the candidate costs 3%, into the reference nothing: the crossover
    PASSes a true 0% loss at -1.5%, the carry-over check finds it and a look that would
    decide stops INCONCLUSIVE naming it; the same cost on both sides is a period
    effect the crossover removes, and no carry-over is found."""
    rng = random.Random(3)
    cand, ref = _abba(12, 0.0, {"candidate": -0.03, "reference": 0.0}, rng)
    check = compare_paired("system_throughput", cand, ref, THROUGHPUT_BAND)
    assert check.difference_pct == pytest.approx(-1.5, abs=0.3)
    found = carry_over("system_throughput", cand, ref, list(range(12)))
    assert found is not None and found.found
    assert found.estimate == pytest.approx(3.0, abs=0.6)
    design = Design(schedule=(12,))
    assert look([check], 12, 1, design).verdict == "PASS"
    stopped = look([check], 12, 1, design, confounded=[found.describe()])
    assert (stopped.verdict, stopped.stop) == ("INCONCLUSIVE", True)
    assert stopped.why is not None and "carry-over" in stopped.why
    same = _abba(12, 0.0, {"candidate": -0.03, "reference": -0.03}, random.Random(3))
    alike = carry_over("system_throughput", *same, list(range(12)))
    assert alike is not None and not alike.found
    assert carry_over("system_throughput", cand[:4], ref[:4], [0, 1, 2, 3]) is None


def test_an_undecided_look_goes_on_despite_a_carry_over() -> None:
    """The check stops a look only where it would decide."""
    check = compare_paired("t", [1000.0, 990.0, 1012.0, 985.0], [1000.0] * 4,
                           THROUGHPUT_BAND)
    step = look([check], 4, 1, Design(max_repeats=40, step=2), confounded=["c"])
    assert (step.verdict, step.stop) == ("INCONCLUSIVE", False)


def test_the_stored_verdict_is_the_designs_repeated_interval() -> None:
    """A difference whose fixed-sample 95% interval just clears the -2% edge at 40
    blocks, while the design's last look (its level below 2.5%: alpha was spent at the
    earlier looks) does not: the stored verdict says what the design said, its interval
    the repeated one."""
    rng = random.Random(11)
    base = [1000.0 * math.exp(rng.gauss(0, 0.012)) for _ in range(40)]
    cand = [v * math.exp(rng.gauss(0, 0.012)) for v in base]
    check = compare_paired("t", cand, base, THROUGHPUT_BAND)
    assert check.se_pct is not None and check.df is not None
    edge = 100 * math.log(0.98)
    estimate = edge + t_quantile(0.975, check.df) * check.se_pct + 0.01
    check = replace(check, log_difference=estimate)
    ci95 = check_ci(check, 0.05)
    assert ci95 is not None and ci95[0] > -2.0  # the 95% interval would PASS
    plan = (4, 10, 16, 22, 28, 34, 40)
    judged = at_look(check, plan, 40)
    level = nominal_levels(plan, ONE_SIDED_ALPHA, spending="hsd")[-1]
    assert judged.level() == pytest.approx(level) and level < ONE_SIDED_ALPHA
    assert judged.ci_pct is not None and judged.ci_pct[0] < -2.0 < ci95[0]
    assert judged.verdict == "INCONCLUSIVE"
    assert "repeated (look 7 of 7 at 40)" in judged.reason
    step = look([check], 40, 7, Design(max_repeats=40, step=2, schedule=plan))
    assert step.verdict == judged.verdict  # the look and the stored verdict agree
    assert at_look(check, plan, 10).level() < judged.level()  # an interim look


def _one_sample_t_crossing(plan: tuple[int, ...], levels: list[float], paths: int,
                           seed: int) -> float:
    """The share of null paths (i.i.d. normal repeats) whose one-sample t statistic
    crosses a look's level, each look's t on its repeats - 1 df."""
    import numpy as np

    rng = np.random.default_rng(seed)
    values = rng.standard_normal((paths, plan[-1]))
    crossed = np.zeros(paths, dtype=bool)
    for n, level in zip(plan, levels, strict=True):
        seen = values[:, :n]
        t = seen.mean(axis=1) * math.sqrt(n) / seen.std(axis=1, ddof=1)
        crossed |= t > t_quantile(1 - level, n - 1)
    return float(crossed.mean())


def test_one_sample_t_looks_cross_at_alpha_where_the_normal_levels_cross_more() -> None:
    """A capacity design's looks (4 to 12 repeats, a one-sample t on 3 to 11 df): the
    normal boundaries' nominal levels let 2.87% of null paths cross for a one-sided 2.5%,
    the t process's own boundaries 2.5% (an independent simulation, 3 standard errors)."""
    plan, paths = (4, 6, 8, 10, 12), 100_000
    normal = [look_level(plan, k, k == 4, ONE_SIDED_ALPHA, "hsd") for k in range(5)]
    own = [look_level(plan, k, k == 4, ONE_SIDED_ALPHA, "hsd", True) for k in range(5)]
    se = math.sqrt(ONE_SIDED_ALPHA * (1 - ONE_SIDED_ALPHA) / paths)
    assert _one_sample_t_crossing(plan, normal, paths, 5) > ONE_SIDED_ALPHA + 5 * se
    assert _one_sample_t_crossing(plan, own, paths, 5) == pytest.approx(ONE_SIDED_ALPHA,
                                                                         abs=3 * se)
    assert own[0] == pytest.approx(normal[0], rel=0.02)  # the first look: one marginal
    assert all(o < z for o, z in zip(own[1:], normal[1:], strict=True))


def test_a_one_sample_t_check_is_judged_at_the_t_boundary_in_look_and_stored() -> None:
    """A FAIL p between the t process's last-look level and the normal one's: a check
    marked one_sample_t (a capacity ratio) is not FAIL, at the look and in its stored
    verdict alike; unmarked, the same statistic FAILs."""
    plan = (4, 6, 8, 10, 12)
    normal = look_level(plan, 4, True, ONE_SIDED_ALPHA, "hsd")
    own = look_level(plan, 4, True, ONE_SIDED_ALPHA, "hsd", True)
    p = math.sqrt(normal * own)  # between the two
    base = compare_paired("c", [1000.0 + i for i in range(12)],
                          [1000.0 + 2 * i for i in range(12)], Band(lower_pct=-5.0))
    assert base.se_pct is not None
    df = 11.0
    edge = 100 * math.log(0.95)
    check = replace(base, df=df, units=12, log_difference=edge + t_quantile(p, df)
                    * base.se_pct)
    design = Design(max_repeats=12, step=2, schedule=plan)
    assert look([check], 12, 5, design).verdict == "FAIL"
    assert at_look(check, plan, 12).verdict == "FAIL"
    marked = replace(check, one_sample_t=True)
    assert look([marked], 12, 5, design).verdict == "INCONCLUSIVE"
    stored = at_look(marked, plan, 12)
    assert stored.verdict == "INCONCLUSIVE" and stored.level() == pytest.approx(own)


def _family_of(check: Check, family: int) -> Comparison:
    """``check`` as the command judges it: its series' comparison among ``family``
    workloads, the others' checks clear PASSes."""
    base = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0, 1004.0, 996.0, 1002.0, 998.0]
    other = compare_paired("other", base, base, THROUGHPUT_BAND)
    comparisons = [Comparison("vm-vs-bare-metal", f"w{i}", "vm", "bm", [other])
                   for i in range(family - 1)]
    mine = Comparison("vm-vs-bare-metal", "mine", "vm", "bm", [check])
    return one_family([mine, *comparisons])[0]


def test_a_look_stops_on_a_fail_only_where_the_commands_family_keeps_it() -> None:
    """Three workloads in one command: a series whose FAIL holds at its own 2.5% but not
    at its share of the family goes on to its next look instead of stopping on a FAIL the
    command's verdict would demote (seen on a real main job: BERT stopped at 10 blocks as a
    FAIL and was INCONCLUSIVE in the family, "1 more block would decide"). Whenever the
    look stops on a FAIL, the family keeps it."""
    rng = random.Random(7)
    plan = (4, 10, 16, 22, 28, 34, 40)
    design = Design(max_repeats=40, step=2, schedule=plan)
    went_on = kept = 0
    for _ in range(200):
        base = [1000.0 * math.exp(rng.gauss(0, 0.02)) for _ in range(10)]
        cand = [v * math.exp(rng.gauss(math.log(0.955), 0.02)) for v in base]
        check = compare_paired("t", cand, base, THROUGHPUT_BAND)
        alone = look([check], 10, 2, design)
        shared = look([check], 10, 2, replace(design, family=3))
        stored = _family_of(at_look(check, plan, 10), 3)
        if shared.verdict == "FAIL":
            assert shared.stop and stored.verdict == "FAIL"
            kept += 1
        elif alone.verdict == "FAIL":
            assert not shared.stop and shared.next_total == 16
            assert stored.verdict == "INCONCLUSIVE"
            assert "share of the command's 2.5% (split over the 3 workloads" in \
                stored.checks[0].reason
            went_on += 1
    assert kept > 10 and went_on > 10  # both cases drawn


def test_one_family_splits_the_alpha_between_its_comparisons() -> None:
    """A command of one workload spends the whole 2.5% on it; of two, half each, with
    Holm within each workload's own checks."""
    base = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0, 1004.0, 996.0]
    noise = [0.01, -0.012, 0.004, 0.008, -0.01, 0.0, 0.012, -0.006]
    marginal = compare_paired("m", [v * 0.971 * (1 + e) for v, e in
                                    zip(base, noise, strict=True)], base, THROUGHPUT_BAND)
    assert marginal.verdict == "FAIL"
    p = fail_p_value(marginal)
    assert p is not None and ONE_SIDED_ALPHA / 2 < p <= ONE_SIDED_ALPHA
    assert _family_of(marginal, 1).verdict == "FAIL"
    assert _family_of(marginal, 2).verdict == "INCONCLUSIVE"
    clear = compare_paired("c", [v * 0.8 for v in base], base, THROUGHPUT_BAND)
    assert _family_of(clear, 5).verdict == "FAIL"


def test_a_clear_fail_elsewhere_does_not_lend_its_share_to_a_marginal_one() -> None:
    """Two workloads: one clearly slower, the other's FAIL marginal (p between 1.25% and
    2.5%). One Holm over both checks would keep the marginal FAIL at its second step (at
    2.5%), which its own looks, run before the other workload measured anything, could not
    know; at its share of the family (1.25%) it is INCONCLUSIVE, as its looks judged it."""
    base = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0, 1004.0, 996.0]
    noise = [0.01, -0.012, 0.004, 0.008, -0.01, 0.0, 0.012, -0.006]
    marginal = compare_paired("m", [v * 0.971 * (1 + e) for v, e in
                                    zip(base, noise, strict=True)], base, THROUGHPUT_BAND)
    clear = compare_paired("c", [v * 0.8 for v in base], base, THROUGHPUT_BAND)
    assert [c.verdict for c in holm([clear, marginal])] == ["FAIL", "FAIL"]  # one Holm
    family = one_family([Comparison("vm-vs-bare-metal", name, "vm", "bm", [check])
                         for name, check in (("clear", clear), ("marginal", marginal))])
    assert [c.verdict for c in family] == ["FAIL", "INCONCLUSIVE"]
    assert look([marginal], 8, 1, Design(schedule=(8,), family=2)).verdict != "FAIL"


def test_holm_within_a_workloads_share_keeps_its_second_fail_at_half_the_share() -> None:
    """Two workloads of two checks each, the first with two FAILs: Holm within its share
    of 1.25% tests its second-smallest p at 1.25%. One Holm over all four checks tested
    it at 2.5% / 3, and the FAIL the first workload's looks stopped on could be lost."""
    base = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0, 1004.0, 996.0]
    noise = [0.01, -0.012, 0.004, 0.008, -0.01, 0.0, 0.012, -0.006]
    clear = compare_paired("c", [v * 0.8 for v in base], base, THROUGHPUT_BAND)
    candidates = (compare_paired("s", [v * f / 1000 * (1 + e) for v, e in
                                       zip(base, noise, strict=True)], base, THROUGHPUT_BAND)
                  for f in range(960, 975))
    second = next(c for c in candidates if (p := fail_p_value(c)) is not None
                  and ONE_SIDED_ALPHA / 3 < p <= ONE_SIDED_ALPHA / 2)
    same = compare_paired("o", [v * (1 - e) for v, e in zip(base, noise, strict=True)],
                          base, THROUGHPUT_BAND)
    assert fail_p_value(same) is not None
    assert [c.verdict for c in holm([clear, second, same, same])][:2] == \
        ["FAIL", "INCONCLUSIVE"]  # one Holm over all four
    family = one_family([
        Comparison("vm-vs-bare-metal", "two", "vm", "bm", [clear, second]),
        Comparison("vm-vs-bare-metal", "other", "vm", "bm", [same, same])])
    assert [c.verdict for c in family[0].checks] == ["FAIL", "FAIL"]
