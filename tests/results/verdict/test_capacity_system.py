"""The LLM capacity judged as a system where the instances share their compute
(vgpu.results.verdict.capacity_system): the virtual-clock proofs of the per-instance verdict
(identical PASS, 5% slower FAIL, stalls FAIL on ITL) hold for the sum of three instances'
searches, and the choice between per instance and system follows the devices and plan."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from loadgen.llm.capacity import find_capacity
from loadgen.llm.slice_engine import SliceProfile, simulated_run
from tests.results.capacity_cases import BUDGET, MARGIN_PCT, PROFILE, SHAPE, SLO, START_QPS
from vgpu.results.verdict.capacity_checks import position_checks
from vgpu.results.verdict.capacity_system import Sharing, sharing
from vgpu.results.verdict.compare import at_look, fail_p_value, holm
from vgpu.results.verdict.sequential import Design, look

NAMES = ["s-4g", "s-2g", "s-1g"]
SHARED = Sharing(True, "the 3 instances share this machine's CPU cores")


def _search(profile: SliceProfile, instance: int, repeat: int) -> dict[str, Any]:
    result = find_capacity(lambda rate, _run: simulated_run(
        profile, rate, SHAPE, SLO, instance, repeat, BUDGET), START_QPS, BUDGET)
    return {**result.to_json(), "seed": instance, "budget": {"resolution": 0.01}}


def _checks(vm_profile: SliceProfile, shared: Sharing = SHARED) -> dict[str, Any]:
    vm = [[_search(vm_profile, k, r) for k in range(3)] for r in range(3)]
    bare = [[_search(PROFILE, k, r) for k in range(3)] for r in range(3)]
    return {c.metric: c for c in holm(position_checks(NAMES, vm, bare, MARGIN_PCT, 5.0,
                                                      shared))}


def test_identical_systems_pass_with_the_instances_shown_not_judged() -> None:
    checks = _checks(PROFILE)
    system = checks["capacity_at_slo system"]
    assert system.verdict == "PASS", system.reason
    assert "judged as a system: the 3 instances share this machine's CPU cores" in \
        system.reason
    assert "per instance, shown and not judged: s-4g 1.000" in system.reason
    assert not any(m.startswith(("capacity_at_slo s-", "valid_at_bare_metal_capacity"))
                   for m in checks)
    assert all(c.verdict == "PASS" for c in checks.values())
    # the latencies too are the system's: the instances' own shown in the guard's reason
    guard = checks["inter_token_latency_p99_at_matched_load system"]
    assert guard.guard and "per instance, shown and not judged: " in guard.reason
    assert set(checks) == {"capacity_at_slo system",
                           "inter_token_latency_p99_at_matched_load system"}


def test_a_latency_guard_neither_holds_back_a_pass_nor_fails_on_one_repeat() -> None:
    """An A/A whose shared instances' latencies scatter (what two shared cores do): the
    guard's wide interval keeps no PASS from the capacity; a rise in one repeat alone is
    no FAIL at the look or in the stored verdict; in every repeat it is."""
    checks = _checks(PROFILE)
    system, guard = checks["capacity_at_slo system"], \
        checks["inter_token_latency_p99_at_matched_load system"]
    wide = replace(guard, log_difference=20.0, se_pct=15.0, difference_pct=22.1)
    plan = (3, 6)
    design = Design(min_repeats=3, max_repeats=6, schedule=plan)
    assert look([system, wide], 3, 1, design).verdict == look([system], 3, 1, design).verdict
    one = replace(wide, log_difference=60.0, se_pct=5.0,
                  fail_blocked="not every repeat's own pooled p99 is above +5%")
    assert fail_p_value(one) == 1.0 and look([system, one], 3, 1, design).verdict != "FAIL"
    assert at_look(one, plan, 3).verdict == "PASS"
    every = replace(one, fail_blocked=None)
    assert look([system, every], 3, 1, design).verdict == "FAIL"
    assert at_look(every, plan, 3).verdict == "FAIL"


def test_a_5_percent_slower_system_fails_its_capacity() -> None:
    system = _checks(replace(PROFILE, slowdown=1.05))["capacity_at_slo system"]
    assert system.verdict == "FAIL", system.reason
    assert system.ci_pct is not None and system.ci_pct[1] < -MARGIN_PCT


def test_stalls_fail_the_inter_token_latency_of_a_system() -> None:
    checks = _checks(replace(PROFILE, stall_every_ms=400.0, stall_ms=5.0))
    assert checks["capacity_at_slo system"].verdict != "FAIL"
    assert any(m.startswith("inter_token_latency_p99_at_matched_load") and c.verdict == "FAIL"
               for m, c in checks.items())


def test_instances_that_own_their_compute_are_judged_one_by_one() -> None:
    owned = Sharing(False, "each instance owns its compute (a MIG instance or a whole GPU)")
    checks = _checks(PROFILE, owned)
    assert "capacity_at_slo system" not in checks
    assert {f"capacity_at_slo {n}" for n in NAMES} <= set(checks)
    assert "judged per instance: each instance owns its compute" in \
        checks["capacity_at_slo s-1g"].reason


def _series(kinds: list[str], migs: list[str | None], scenario: str = "none") -> Any:
    results = [SimpleNamespace(result=SimpleNamespace(device_kind=k, mig_uuid=m,
                                                      device_note=None, device_name=None))
               for k, m in zip(kinds, migs, strict=True)]
    return SimpleNamespace(valid_run_ids=[1], instances={1: results},
                           label=f"scenario {scenario}", scenario_id=scenario)


def test_the_choice_follows_the_devices_and_the_plan() -> None:
    cpu = _series(["cpu"] * 3, [None] * 3)
    migs = _series(["mig"] * 3, ["MIG-a", "MIG-b", "MIG-c"])
    assert sharing(cpu, migs).shared and "CPU cores" in sharing(cpu, migs).why
    assert not sharing(migs, migs).shared
    one_device = _series(["mig"] * 2, ["MIG-a", "MIG-a"])
    assert sharing(one_device, migs).shared and "one device" in sharing(one_device, migs).why
    # scenario 6 plans MIG-backed vGPU profiles: its slices own their compute
    assert not sharing(_series(["gpu"] * 3, ["a", "b", "c"], "6")).shared
