"""The LLM verdict on capacity at the latency SLO, against the slice simulator: its
engine on the virtual clock for the verdicts (the same seeded arrivals a lab run sends),
its loopback server for the search itself."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from statistics import stdev
from typing import Any

import pytest

from loadgen.llm.capacity import Measure, find_capacity, matched_repeats, search_repeats
from loadgen.llm.open_loop import EndpointClient, endpoint_run
from loadgen.llm.runs import Budget, LoadShape, Slo
from loadgen.llm.slice_engine import SliceProfile, simulated_run
from loadgen.llm.slice_sim import SliceSimulator
from tests.cli.invoke import run_cli
from vgpu.results.stats.intervals import t_quantile
from vgpu.results.verdict.capacity import Bracket, bracket_interval, judge_capacity, ratio_interval

SLICE = SliceProfile(step_ms=4.0, context_us=16.0)  # capacity ~60-70 q/s at the SLO
START_QPS = 40.0
SHAPE = LoadShape()
SLO = Slo(ttft_ms=200.0, tpot_ms=16.0)
FINE = Budget(runs=14, min_queries=80, duration_s=1.5, resolution=0.005)
REPEATS = 3


def on_virtual_clock(profile: SliceProfile, budget: Budget = FINE) -> Any:
    def measure_for(repeat: int) -> Measure:
        return lambda rate, _run: simulated_run(profile, rate, SHAPE, SLO, 0, repeat, budget)
    return measure_for


def verdict(vm: SliceProfile, bare: SliceProfile = SLICE) -> Any:
    bare_search = {"repeats": search_repeats(on_virtual_clock(bare), REPEATS, START_QPS, FINE)}
    vm_search = {"repeats": search_repeats(on_virtual_clock(vm), REPEATS, START_QPS, FINE)}
    matched = {"repeats": matched_repeats(on_virtual_clock(vm), bare_search["repeats"])}
    return judge_capacity(bare_search, vm_search, matched, capacity_pct=3.0, itl_pct=5.0,
                          tpot_pct=5.0)


def checks(result: Any) -> dict[str, bool]:
    return {c.name: c.passed for c in result.checks}


def test_identical_slices_pass() -> None:
    result = verdict(SLICE)
    assert result.passed, result.lines()
    assert result.capacity.ratio == pytest.approx(1.0)


def test_a_five_percent_slower_step_fails_capacity() -> None:
    result = verdict(replace(SLICE, slowdown=1.05))
    assert not checks(result)["capacity_at_slo"]
    # the TPOT SLO amplifies a slower step: capacity drops by more than the step slows
    assert result.capacity.high < 0.95
    assert not checks(result)["valid_at_bare_metal_capacity"]


def test_periodic_stalls_fail_inter_token_latency_while_mean_tpot_passes() -> None:
    result = verdict(replace(SLICE, stall_every_ms=400.0, stall_ms=5.0))
    assert checks(result) | {"capacity_at_slo": True} == {
        "capacity_at_slo": True, "valid_at_bare_metal_capacity": False,
        "inter_token_latency_p99_at_matched_load": False,
        "time_per_output_token_mean_at_matched_load": True}


def test_repeats_must_pair_and_find_a_capacity() -> None:
    with pytest.raises(ValueError, match="must pair up"):
        ratio_interval([30.0, 31.0], [30.0])
    with pytest.raises(ValueError, match="no VALID rate"):
        ratio_interval([0.0], [30.0])
    interval = ratio_interval([30.0, 33.0, 36.0], [30.0, 30.0, 30.0])
    assert interval.low < interval.ratio < interval.high
    assert interval.ratio == pytest.approx((1.0 * 1.1 * 1.2) ** (1 / 3))


@pytest.mark.slow
def test_the_search_finds_the_simulators_known_capacity_within_5_percent() -> None:
    """The search on the loopback server (wall clock, a real client) against the same
    profile's capacity on the virtual clock, finely bisected."""
    known = find_capacity(on_virtual_clock(SLICE)(0), START_QPS, FINE)
    budget = Budget(runs=8, min_queries=80, duration_s=1.5, resolution=0.02)
    with SliceSimulator(SLICE) as sim:
        client = EndpointClient(sim.url, "sim")
        found = find_capacity(lambda rate, run: endpoint_run(
            client, rate, run, SHAPE, SLO, 0, 0, budget), START_QPS, budget)
    assert known.confirmed and found.capacity == pytest.approx(known.capacity, rel=0.05)
    assert len(found.runs) <= budget.runs
    assert all(r.goodput > 0 for r in found.runs)


def test_vgpu_compare_capacity_judges_the_files_and_refuses_broken_ones(
        tmp_path: Path) -> None:
    def write(name: str, profile: SliceProfile, matched_to: Any = None) -> Path:
        repeats = (matched_repeats(on_virtual_clock(profile), matched_to["repeats"])
                   if matched_to else
                   search_repeats(on_virtual_clock(profile), 2, START_QPS, FINE))
        path = tmp_path / name
        path.write_text(json.dumps({"repeats": repeats}))
        return path

    bare = write("bare.json", SLICE)
    bare_doc = json.loads(bare.read_text())
    same = [str(bare), str(write("vm.json", SLICE)),
            str(write("m.json", SLICE, bare_doc))]
    code, out, _ = run_cli(["compare-capacity", *same])
    assert code == 0 and "LLM verdict: PASS" in out
    slow = replace(SLICE, slowdown=1.05)
    code, out, _ = run_cli(["compare-capacity", str(bare), str(write("s.json", slow)),
                            str(write("sm.json", slow, bare_doc)), "--json"])
    assert code == 3 and json.loads(out)["passed"] is False
    (tmp_path / "broken.json").write_text('{"repeats": [{"repeat": 0}]}')
    code, _, err = run_cli(["compare-capacity", str(bare), same[1],
                            str(tmp_path / "broken.json")])
    assert code == 2 and "repeats[0].matched" in err and "--matched-to" in err
    other_seed = tmp_path / "seed1.json"
    other_seed.write_text(json.dumps({**json.loads(Path(same[1]).read_text()),
                                      "seed": 1}))
    bare.write_text(json.dumps({**bare_doc, "seed": 0}))
    code, _, err = run_cli(["compare-capacity", str(bare), str(other_seed), same[2]])
    assert code == 2 and "used seed 1, bare metal's search 0" in err


def test_the_interval_is_the_t_interval_of_the_centres_floored_at_the_brackets() -> None:
    # brackets 2% wide on each side, their centres apart: the half-width is the centres'
    # t interval alone (each centre's bracket error is in their spread already)
    vm = [Bracket(100.0, 102.0), Bracket(97.0, 98.94), Bracket(103.0, 105.06),
          Bracket(99.0, 100.98)]
    bare = [Bracket(100.0, 102.0)] * 4
    interval = bracket_interval(vm, bare)
    centres = [math.log(v.low * v.high / (b.low * b.high)) / 2
               for v, b in zip(vm, bare, strict=True)]
    half = t_quantile(0.975, 3) * stdev(centres) / 2
    assert half > 0.0198  # wider than the brackets' mean half-width
    assert math.log(interval.high / interval.ratio) == pytest.approx(half)
    assert math.log(interval.ratio / interval.low) == pytest.approx(half)
    assert interval.spread == "95% t interval of 4 repeats"
    # repeats that agree exactly: the brackets' half-width, never less
    same = bracket_interval([Bracket(100.0, 101.0)] * 3, [Bracket(100.0, 101.0)] * 3)
    assert math.log(same.high / same.low) / 2 == pytest.approx(math.log(1.01))
    assert same.spread.startswith("the brackets' half-width")
