"""The capacity checks of a stored comparison (vgpu.results.capacity_checks): searches
on the slice simulator's virtual clock (the known answer of a profile), judged by
judge_capacity and turned into the comparison's checks."""

from __future__ import annotations

from typing import Any

from loadgen.llm.capacity import Budget, LoadShape, Slo, find_capacity
from loadgen.llm.slice_engine import SliceProfile, simulated_run
from vgpu.results.capacity_checks import instance_checks, matched_run

SHAPE = LoadShape(16, 48, 16)
SLO = Slo(162.0, 50.0)
BUDGET = Budget(runs=6, min_queries=100, duration_s=1.0, resolution=0.05)


def _search(slowdown: float, repeat: int) -> dict[str, Any]:
    profile = SliceProfile(step_ms=10.0, max_num_seqs=16, slowdown=slowdown)
    result = find_capacity(
        lambda rate, _run: simulated_run(profile, rate, SHAPE, SLO, 0, repeat, BUDGET),
        50.0, BUDGET)
    return {**result.to_json(), "seed": 0, "slo_ms": {"ttft_ms": 162.0, "tpot_ms": 50.0},
            "shape": {"input_min": 16}, "budget": {"resolution": 0.05}}


def _verdicts(vm_slowdown: float) -> dict[str, str]:
    vm = [_search(vm_slowdown, r) for r in range(2)]
    bare = [_search(1.0, r) for r in range(2)]
    return {c.metric: c.verdict for c in instance_checks("", vm, bare, 2.0, 5.0)}


def test_identical_slices_pass() -> None:
    assert _verdicts(1.0) == {
        "capacity_at_slo": "PASS", "valid_at_bare_metal_capacity": "PASS",
        "inter_token_latency_p99_at_matched_load": "PASS",
        "time_per_output_token_mean_at_matched_load": "PASS"}


def test_a_5_percent_slower_step_fails_capacity_and_the_matched_load() -> None:
    checks = _verdicts(1.05)
    assert checks["capacity_at_slo"] == "FAIL"
    assert checks["valid_at_bare_metal_capacity"] == "FAIL"


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
    [check] = instance_checks("", [open_ended], [_search(1.0, 0)], 2.0, 5.0)
    assert check.verdict == "INCONCLUSIVE"
    assert "VM repeat 0" in check.reason and "capacity.start_qps" in check.reason
