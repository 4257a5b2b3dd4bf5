"""The capacity checks of a stored comparison (vgpu.results.verdict.capacity_checks): searches
on the slice simulator's virtual clock (the known answer of a profile), judged by
judge_capacity and turned into the comparison's checks."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from loadgen.llm.capacity import find_capacity
from loadgen.llm.runs import tail
from loadgen.llm.slice_engine import SliceProfile, simulated_run
from tests.results.capacity_cases import BUDGET, MARGIN_PCT, PROFILE, SHAPE, SLO, START_QPS
from vgpu.results.verdict.capacity_checks import (
    LATENCY_LOAD_SHARE,
    gate_p_value,
    instance_checks,
    kept_at_look,
    matched_run,
    more_runs,
    shared_load,
)
from vgpu.results.verdict.compare import Comparison, at_look, fail_p_value, holm
from vgpu.results.verdict.decided import advice as decided_advice
from vgpu.results.verdict.decided import decided_by
from vgpu.results.verdict.sequential import Design, look


def _search(profile: SliceProfile, repeat: int) -> dict[str, Any]:
    result = find_capacity(
        lambda rate, _run: simulated_run(profile, rate, SHAPE, SLO, 0, repeat, BUDGET),
        START_QPS, BUDGET)
    return {**result.to_json(), "seed": 0, "slo_ms": {"ttft_ms": 300.0, "tpot_ms": 20.0},
            "shape": {"input_min": 16}, "budget": {"resolution": 0.01}}


def _verdicts(vm_profile: SliceProfile, repeats: int = 3) -> dict[str, str]:
    vm = [_search(vm_profile, r) for r in range(repeats)]
    bare = [_search(PROFILE, r) for r in range(repeats)]
    return {c.metric: c.verdict
            for c in holm(instance_checks("", vm, bare, MARGIN_PCT, 5.0))}


def test_identical_slices_pass() -> None:
    assert _verdicts(PROFILE) == {
        "capacity_at_slo": "PASS", "valid_at_bare_metal_capacity": "PASS",
        "inter_token_latency_p99_at_matched_load": "PASS",
        "time_per_output_token_mean_at_matched_load": "PASS"}


def test_a_5_percent_slower_step_fails_capacity_and_the_matched_load() -> None:
    checks = _verdicts(replace(PROFILE, slowdown=1.05))
    assert checks["capacity_at_slo"] == "FAIL"
    # 3 INVALID of 3 at the line: p = 1/8 for a VM within the margin, no FAIL on its own
    assert checks["valid_at_bare_metal_capacity"] == "INCONCLUSIVE"
    # 7 of 7: p = 1/128, a FAIL that holds among the 4 checks (Holm)
    checks = _verdicts(replace(PROFILE, slowdown=1.05), repeats=7)
    assert checks["capacity_at_slo"] == checks["valid_at_bare_metal_capacity"] == "FAIL"


def test_two_repeats_decide_no_pass() -> None:
    [check, *_] = instance_checks("", [_search(PROFILE, r) for r in range(2)],
                                  [_search(PROFILE, r) for r in range(2)], MARGIN_PCT, 5.0)
    assert check.metric == "capacity_at_slo" and check.verdict == "INCONCLUSIVE"
    assert "needs at least 3" in check.reason


def test_the_gate_is_a_test_at_the_margin() -> None:
    assert gate_p_value(3, 3) == pytest.approx(1 / 8)
    assert gate_p_value(6, 6) == pytest.approx(1 / 64)
    assert gate_p_value(0, 4) == pytest.approx(1.0)
    assert gate_p_value(5, 6) == pytest.approx(7 / 64)


def test_periodic_stalls_fail_the_pooled_itl_p99_while_mean_tpot_passes() -> None:
    checks = _verdicts(replace(PROFILE, stall_every_ms=400.0, stall_ms=5.0))
    assert checks["inter_token_latency_p99_at_matched_load"] == "FAIL"
    assert checks["time_per_output_token_mean_at_matched_load"] == "PASS"
    assert checks["capacity_at_slo"] != "FAIL"


def test_latencies_compare_below_both_knees_at_a_load_both_searches_ran() -> None:
    bare, vm = _search(PROFILE, 0), _search(replace(PROFILE, slowdown=1.05), 0)
    rate, vm_run, bare_run = shared_load(vm, bare)
    lower = min(bare["confirmed_capacity_qps"], vm["confirmed_capacity_qps"])
    assert vm_run["rate"] == bare_run["rate"] == rate
    both = [r["rate"] for r in bare["runs"] if any(v["rate"] == r["rate"] for v in vm["runs"])]
    assert rate == max(r for r in both if r <= LATENCY_LOAD_SHARE * lower)


def test_without_a_shared_rate_below_the_knees_the_lowest_shared_one_is_used() -> None:
    def search(capacity: float, rates: list[float]) -> dict[str, Any]:
        return {"confirmed_capacity_qps": capacity, "capacity_qps": capacity,
                "runs": [{"rate": r, "valid": r <= capacity} for r in rates]}

    vm, bare = search(100.0, [90.0, 100.0, 110.0]), search(105.0, [100.0, 110.0, 105.0])
    rate, vm_run, bare_run = shared_load(vm, bare)
    assert rate == 100.0 and vm_run["rate"] == bare_run["rate"] == 100.0
    # at the knees, tenfold latencies of identical slices were one repeat's noise: the
    # shared rate well below both is the one judged
    vm["runs"].append({"rate": 50.0, "valid": True})
    bare["runs"].append({"rate": 50.0, "valid": True})
    assert shared_load(vm, bare)[0] == 50.0


def _run(rate: float, valid: bool) -> dict[str, Any]:
    return {"rate": rate, "valid": valid}


def test_the_vm_run_standing_for_bare_metals_capacity() -> None:
    runs = [_run(50, True), _run(100, False), _run(70, True), _run(85, False)]
    search = {"runs": runs}
    assert matched_run(search, 70) is runs[2]  # the very rate
    assert matched_run(search, 90) is runs[3]  # INVALID at a lower load than 90
    assert matched_run(search, 60) is runs[2]  # VALID under more load than 60
    assert matched_run({"runs": [_run(50, True)]}, 200)["rate"] == 50  # nearest


def test_a_search_that_never_found_an_invalid_rate_is_only_a_lower_bound() -> None:
    runs = [{"rate": r, "valid": True, "reasons": []} for r in (50.0, 100.0, 200.0, 200.0)]
    open_ended = {"capacity_qps": 200.0, "confirmed_capacity_qps": 200.0, "runs": runs,
                  "seed": 0}
    [check] = instance_checks("", [open_ended], [_search(PROFILE, 0)], 2.0, 5.0)
    assert check.verdict == "INCONCLUSIVE"
    assert "VM repeat 0" in check.reason and "capacity.start_qps" in check.reason


def _bracketed(low: float, high: float) -> dict[str, Any]:
    """A search whose final bracket is ``low`` (VALID) to ``high`` (INVALID)."""
    runs = [{"rate": low, "valid": True, "reasons": []},
            {"rate": high, "valid": False, "reasons": ["p99 TPOT over 16 ms"]}]
    return {"capacity_qps": low, "confirmed_capacity_qps": low, "runs": runs, "seed": 0,
            "budget": {"resolution": 0.01}}


def _capacity_check(vm: list[dict[str, Any]], bare: list[dict[str, Any]]) -> Any:
    return next(c for c in instance_checks("", vm, bare, MARGIN_PCT, 5.0)
                if c.metric == "capacity_at_slo")


def test_the_interval_is_never_narrower_than_the_searches_brackets() -> None:
    check = _capacity_check([_bracketed(100, 102)] * 3, [_bracketed(100, 102)] * 3)
    low, high = check.ci_pct
    assert low == pytest.approx((100 / 102 - 1) * 100)
    assert high == pytest.approx((102 / 100 - 1) * 100)
    assert check.band.lower_pct == pytest.approx(-MARGIN_PCT)  # the stated margin
    assert check.df == 2  # the repeats' df, not infinity
    assert check.verdict == "PASS"


def test_a_resolution_as_wide_as_the_margin_is_inconclusive_not_a_wider_margin() -> None:
    # searches that reached their resolution of 6%, against a 5% margin
    wide = [{**_bracketed(100, 106), "budget": {"resolution": 0.06}}] * 3
    check = _capacity_check(wide, wide)
    assert check.band.lower_pct == pytest.approx(-MARGIN_PCT)
    assert check.verdict == "INCONCLUSIVE"
    assert "a finer capacity.resolution would decide" in check.reason


def test_brackets_the_runs_could_not_narrow_are_inconclusive_and_say_so() -> None:
    wide = [_bracketed(100, 141.4)] * 2
    check = _capacity_check(wide, wide)
    assert check.verdict == "INCONCLUSIVE"
    assert "raise capacity.runs" in check.reason and "bare metal repeat 1" in check.reason
    # by how much, and the runs that would reach the 1% asked: 2^(1/64) < 1.01 after 6
    # more bisections of a 41.4% bracket
    assert "bare metal repeat 1 100.0-141.4/s (41.4%)" in check.reason
    assert "raise capacity.runs to 8 (6 more bisections) to reach it" in check.reason
    assert more_runs(1.414, 0.01) == 6 and more_runs(1.009, 0.01) == 0


def test_the_design_s_look_keeps_what_the_capacity_check_said() -> None:
    wide = [_bracketed(100, 141.4)] * 4
    check = _capacity_check(wide, wide)
    judged = kept_at_look(check, at_look(check, (4, 6), 4))
    assert "% repeated (look 1 of 2 at 4) CI" in judged.reason.split("; ")[0]
    assert judged.reason.endswith(check.reason)
    assert "raise capacity.runs to 8" in decided_advice(judged.reason)
    # brackets at the resolution: the look's blocks are what would decide; the verdict
    # table's sentence stays one line however long the detail
    near = [_bracketed(100, 100.9), _bracketed(96, 96.8), _bracketed(99, 99.9),
            _bracketed(94, 94.8)]
    check = _capacity_check(near, [_bracketed(100, 100.9)] * 4)
    judged = kept_at_look(check, at_look(check, (4, 6), 4))
    assert judged.verdict == "INCONCLUSIVE" and judged.reason.startswith(check.reason)
    sentence = decided_by(Comparison(kind="vm-vs-bare-metal", title="6 vs bm6",
                                     candidate="6", reference="bm6", checks=[judged]))
    assert sentence == ("capacity_at_slo undecided: -2.8% [-8.7%, +3.5%], allowed >= "
                        "-5.00%; about 27 blocks in all (23 more) would decide at this "
                        "noise (estimate -2.79%, 2.3% from the limit)")
    assert len(sentence) < 250 < len(judged.reason)


def test_a_noise_bound_interval_asks_for_blocks_not_one_more_bisection() -> None:
    """Brackets just over the resolution (1.2% for 1%) inside an interval the repeats'
    scatter makes 20 times wider: one more bisection would not decide, more blocks
    would, and the one-line advice says so."""
    vm = [_bracketed(v, v * 1.012) for v in (100, 80, 120, 90)]
    bare = [_bracketed(v, v * 1.012) for v in (110, 95, 85, 105)]
    check = _capacity_check(vm, bare)
    assert "raise capacity.runs" in check.reason and check.bracket_pct < 2.0
    judged = kept_at_look(check, at_look(check, (4, 6), 4))
    advice = decided_advice(judged.reason)
    assert "raise capacity.runs" not in advice and "blocks" in advice, advice


def test_identical_sides_whose_knee_flipped_in_one_repeat_still_pass() -> None:
    bare = [_bracketed(100, 101)] * 4
    vm = [_bracketed(100, 101), _bracketed(100, 101), _bracketed(100, 101),
          _bracketed(99, 100)]
    check = _capacity_check(vm, bare)
    assert check.verdict == "PASS", check.reason
    assert "t interval of 4 repeats" in check.reason
    # VALID at bare metal's capacity less the allowed 5%: the VM's run at 99/s
    gate = next(c for c in instance_checks("", vm, bare, MARGIN_PCT, 5.0)
                if c.metric == "valid_at_bare_metal_capacity")
    assert gate.verdict == "PASS", gate.reason
    assert "95.0/s (its run at 99.0/s)" in gate.reason


def _with_gaps(low: float, gaps_ms: list[float]) -> dict[str, Any]:
    """A search bracketed at ``low``/``low * 1.02`` whose run at ``low`` had these gaps."""
    search = _bracketed(low, low * 1.02)
    at = search["runs"][0]
    at.update(itl_p99_ms=float(np.percentile(gaps_ms, 99, method="higher")),
              tpot_mean_ms=float(np.mean(gaps_ms)),
              tails={"itl": tail([g / 1e3 for g in gaps_ms])})
    return search


def test_one_repeats_stall_of_the_machine_is_no_itl_fail() -> None:
    rng = np.random.default_rng(0)
    steady = [list(rng.normal(20.0, 0.5, 1500)) for _ in range(2)]
    hiccup = [*steady[1][:1440], *([60.0] * 60)]  # one 40 ms stall across every stream
    bare = [_with_gaps(100, steady[0]), _with_gaps(100, steady[1])]
    checks = {c.metric: c for c in instance_checks(
        "", [_with_gaps(100, steady[0]), _with_gaps(100, hiccup)], bare, 2.0, 5.0)}
    itl = checks["inter_token_latency_p99_at_matched_load"]
    assert itl.ci_pct is not None and itl.ci_pct[0] > 5.0  # the pooled interval alone
    assert itl.verdict == "INCONCLUSIVE", itl.reason
    assert "the repeats disagree" in itl.reason and "tail samples" in itl.reason
    # the look and the stored verdict follow the check's own rule, not its p alone
    assert fail_p_value(itl) == 1.0
    plan = (2, 4)
    step = look([itl], 2, 1, Design(min_repeats=2, max_repeats=4, schedule=plan))
    assert step.verdict != "FAIL" and not step.stop
    judged = at_look(itl, plan, 2)
    assert judged.verdict == "INCONCLUSIVE" and "not a FAIL" in judged.reason
    stalled = [[*s[:1440], *([26.0] * 60)] for s in steady]  # both repeats, +30%
    checks = {c.metric: c for c in instance_checks(
        "", [_with_gaps(100, stalled[0]), _with_gaps(100, stalled[1])], bare, 2.0, 5.0)}
    assert checks["inter_token_latency_p99_at_matched_load"].verdict == "FAIL"


def test_a_search_whose_only_valid_rate_failed_its_rerun_is_at_its_knee() -> None:
    # a warm start that lands on the knee: VALID once, INVALID on its rerun, every rate
    # above INVALID; the knee is there (VALID half the times it ran), so it is judged
    failed = {"rate": 50.0, "valid": False, "reasons": ["p99 TPOT over 20 ms"]}
    runs = [{"rate": 50.0, "valid": True, "reasons": []},
            {"rate": 50.5, "valid": False, "reasons": ["p99 TPOT over 20 ms"]}, failed]
    knee = {"capacity_qps": 50.0, "confirmed_capacity_qps": 0.0, "runs": runs, "seed": 0}
    bare = {**knee, "runs": [{**r, "valid": r["rate"] <= 50.0} for r in runs],
            "confirmed_capacity_qps": 50.0}
    check = _capacity_check([knee] * 3, [bare] * 3)
    assert check.verdict == "PASS", check.reason
    # VALID once in three runs there: below the knee's half, no capacity to judge
    rarely = {**knee, "runs": [*runs, failed]}
    [check] = instance_checks("", [rarely], [_search(PROFILE, 0)], 2.0, 5.0)
    assert check.verdict == "INCONCLUSIVE"
    assert "VM repeat 0 (50.0/s VALID, INVALID on more of its reruns)" in check.reason
    assert "capacity.start_qps" in check.reason
