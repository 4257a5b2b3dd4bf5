"""The LLM capacity verdict's acceptance checks on real benches, outside the test suite
(each a bare-metal series and a VM candidate on the slice simulator through the CLI, 4
repeats a side, about a minute each on a 2-core machine): a slice with 10% slower steps
FAILs, identical slices are never FAILed, and a periodic stall FAILs the pooled ITL p99
while the mean TPOT PASSes. The suite benches the 10%-slower slice with 3 repeats a side
and requires only that it is never PASSed (tests/bench/test_llm_capacity_bench.py); it
judges identical slices, 5% slower steps and 5 ms stalls on the slice simulator's virtual
clock (tests/results/verdict/test_capacity_checks.py); benchmarks/llm_capacity_twins.py
measures how often identical twins PASS.

    .venv/bin/python -m pytest benchmarks/llm_capacity_checks.py
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

# 4 repeats a side (the suite's module runs 3): with 3 (df 2) a capacity 13% lower missed
# the family's Holm level by a hair (p = 0.0064 against 0.00625)
os.environ.setdefault("VGPU_CAPACITY_REPEATS", "4")

from tests.bench.conftest import RunVgpu, harness_cache, run_vgpu
from tests.bench.test_llm_capacity_bench import (
    PROFILE,
    REPEATS,
    _bench,
    _checks,
    _report_checks,
    _verdict,
    bare_metal,
)

__all__ = ["bare_metal", "harness_cache", "run_vgpu"]
# the suite's module read the variable when it was imported first, in this process
assert REPEATS == 4, f"run this file on its own: it benches {REPEATS} repeats a side, not 4"


@pytest.mark.slow
def test_a_slice_with_10_percent_slower_steps_fails(
        run_vgpu: RunVgpu, harness_cache: Path, bare_metal: Path, tmp_path: Path) -> None:
    # 5% slower steps FAIL on the virtual clock; in real time on two shared cores their
    # 10-14% loss sat inside four repeats' noise in 2 of 6 runs (INCONCLUSIVE), so the real
    # path is shown with twice the slowdown. What the slower steps moved FAILs: the
    # capacity at the SLO, or the token latency at the matched load (the capacity's repeats
    # can scatter past a 10% loss on cores shared with other work; never to a PASS).
    done, report = _bench(run_vgpu, harness_cache, bare_metal, tmp_path,
                          replace(PROFILE, slowdown=1.10))
    assert done.returncode == 3, done.stdout + done.stderr
    checks = _verdict(done.stdout)
    assert _report_checks(tmp_path) == checks
    assert checks["capacity_at_slo"] in ("FAIL", "INCONCLUSIVE"), checks
    assert "FAIL" in (checks["capacity_at_slo"],
                      checks["time_per_output_token_mean_at_matched_load"]), checks
    assert "FAIL" in report


@pytest.mark.slow
def test_identical_slices_are_never_failed(run_vgpu: RunVgpu, harness_cache: Path, bare_metal: Path,
                               tmp_path: Path) -> None:
    done, _ = _bench(run_vgpu, harness_cache, bare_metal, tmp_path, PROFILE)
    assert done.returncode in (0, 4), done.stdout + done.stderr  # PASS, or undecided
    checks = _verdict(done.stdout)
    assert _report_checks(tmp_path) == checks
    # On shared cores a knee flip in one repeat can leave the capacity interval across
    # the line (PASS in 4 of 5 here: benchmarks/llm_capacity_twins.py); on the virtual
    # clock identical slices always PASS (tests/results/verdict/test_capacity_checks.py). A
    # session of identical slices is never FAILed, and an undecided check says why.
    by_metric = {c["metric"]: c for c in _checks(done.stdout)}
    capacity = by_metric["capacity_at_slo"]
    assert capacity["verdict"] == "PASS" or (
        capacity["verdict"] == "INCONCLUSIVE" and capacity["reason"]), capacity
    assert checks["valid_at_bare_metal_capacity"] == "PASS", done.stdout
    assert checks["time_per_output_token_mean_at_matched_load"] == "PASS", done.stdout
    # ITL p99 rests on ~30 tail gaps: one stall of these shared cores in one repeat's run
    # raises it there alone, which the check calls INCONCLUSIVE, never FAIL
    itl = by_metric["inter_token_latency_p99_at_matched_load"]
    assert itl["verdict"] == "PASS" or "the repeats disagree" in itl["reason"], itl


@pytest.mark.slow
def test_periodic_stalls_fail_inter_token_latency_while_mean_tpot_passes(
        run_vgpu: RunVgpu, harness_cache: Path, bare_metal: Path, tmp_path: Path) -> None:
    # a stall as long as a step: on these shared cores bare metal's own ITL p99 is ~23 ms
    # (20 ms on the virtual clock), so a 5 ms stall's gaps are within its noise in some
    # runs (tests/results/verdict/test_capacity_checks.py judges 5 ms stalls on the virtual clock)
    done, _ = _bench(run_vgpu, harness_cache, bare_metal, tmp_path,
                     replace(PROFILE, stall_every_ms=600.0, stall_ms=10.0))
    assert done.returncode == 3, done.stdout + done.stderr
    checks = _verdict(done.stdout)
    assert checks["inter_token_latency_p99_at_matched_load"] == "FAIL", done.stdout
    assert checks["time_per_output_token_mean_at_matched_load"] == "PASS", done.stdout
    reason = next(c["reason"] for c in _checks(done.stdout)
                  if c["metric"] == "inter_token_latency_p99_at_matched_load")
    assert "pooled over 2 repeats" in reason and "tail samples" in reason
