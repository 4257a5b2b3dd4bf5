"""The capacity workload's plan (vgpu.bench.capacity_plan): the runs a warm-started
search needs to reach its resolution, where each block's searches start, and the plan
stated before the first run."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from loadgen.llm.capacity import find_capacity
from loadgen.llm.runs import Budget, RunResult
from vgpu import catalog
from vgpu.bench.capacity_plan import (
    CAPACITY_MAX_BLOCKS,
    PILOT_BLOCKS,
    WARM_START,
    bisections,
    plan_note,
    resolution_note,
    runs_to_resolution,
    warm_starts,
)
from vgpu.bench.pacing import pacing_for
from vgpu.bench.workload import BenchOverrides, EffectiveWorkload, effective_workload
from vgpu.results.verdict.sequential import schedule


def _at(rate: float, knee: float) -> RunResult:
    valid = rate <= knee
    return RunResult(rate=rate, queries=100, valid=valid,
                     reasons=[] if valid else ["TTFT p99 over"], failed=0, ttft_p99_ms=1.0,
                     tpot_p99_ms=1.0, tpot_mean_ms=1.0, itl_p99_ms=1.0, itl_p999_ms=1.0,
                     longest_stall_ms=1.0, goodput=rate, output_tokens=1600)


def _scenario_6_llm() -> EffectiveWorkload:
    workload = next(w for w in catalog.load("6").workloads if w.model == "llm")
    return effective_workload(workload, True, BenchOverrides())


@pytest.mark.parametrize(("resolution", "runs"), [(0.01, 10), (0.025, 8), (0.005, 11)])
def test_a_warm_started_search_reaches_its_resolution_in_the_runs_stated(
        resolution: float, runs: int) -> None:
    assert runs_to_resolution(resolution) == runs
    # the real search, from WARM_START of the last capacity, wherever the knee moved to
    # within the factor the first two runs bracket
    for moved in (0.4, 0.7, 0.76, 1.0, 1.3, 1.49):
        knee = 20.0 * moved
        found = find_capacity(lambda rate, _n, k=knee: _at(rate, k), WARM_START * 20.0,
                              Budget(runs=runs, resolution=resolution))
        high = min(r.rate for r in found.runs if not r.valid)
        assert found.confirmed and found.confirmed_capacity <= knee < high
        assert high / found.confirmed_capacity <= 1 + resolution + 1e-9, (moved, found)


def test_fewer_runs_say_how_wide_the_bracket_stays_and_what_would_reach_it() -> None:
    workload = _scenario_6_llm()
    assert workload.llm is not None and workload.llm.capacity is not None
    assert "10 runs reach the 1% bracket" in resolution_note(workload)
    narrow = replace(workload, llm=replace(workload.llm, capacity=replace(
        workload.llm.capacity, runs=8)))
    note = resolution_note(narrow)
    # 8 runs: 2 bracket, 5 bisect (2^(1/32): 2.2%), 1 rerun
    assert "bracket to about 2.2%, not the stated 1%: capacity.runs 10 would reach it" in note
    assert bisections(0.01) == math.ceil(math.log2(math.log(2) / math.log(1.01)))


def test_each_position_starts_below_the_lower_capacity_of_both_sides() -> None:
    found = warm_starts([
        [("bm-4g", {"confirmed_capacity_qps": 40.0, "capacity_qps": 41.0}),
         ("bm-1g", {"confirmed_capacity_qps": 0.0, "capacity_qps": 0.0})],
        [("vm-4g", {"confirmed_capacity_qps": 35.0, "capacity_qps": 36.0}),
         ("vm-1g", {"confirmed_capacity_qps": 10.0, "capacity_qps": 10.0})]])
    # the 1g position: bare metal found none, so its searches keep the spec's start; the
    # 4g one starts below the lower knee (the final points, VALID when they ran)
    assert found == {"bm-4g": WARM_START * 36.0, "vm-4g": WARM_START * 36.0}


def test_the_plan_states_the_looks_fixed_before_the_first_run() -> None:
    pacing = pacing_for(BenchOverrides(), PILOT_BLOCKS, None, step=2, always=True,
                        default_cap=CAPACITY_MAX_BLOCKS)
    assert pacing is not None and pacing.design.max_repeats == CAPACITY_MAX_BLOCKS
    looks = schedule(PILOT_BLOCKS, pacing.design.max_repeats, pacing.design)
    assert looks == (4, 6, 8, 10, 12)
    note = plan_note(_scenario_6_llm(), looks)
    assert "sequential blocks, looks at 4, 6, 8, 10, 12 (fixed before the first run)" in note
    assert "min for 4 blocks" in note and "min at the cap of 12" in note
    assert "4 blocks, fixed" in plan_note(_scenario_6_llm(), (4,))
    raised = pacing_for(BenchOverrides(max_repeats=16), PILOT_BLOCKS, None, step=2,
                        always=True, default_cap=CAPACITY_MAX_BLOCKS)
    assert raised is not None and raised.design.max_repeats == 16
