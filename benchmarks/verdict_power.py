"""Verdicts that decide, by simulation through the real decision code: series of runs
with the effects a real session has (repeat noise, a cold first run, a period effect
inside each block, drift over the session, a level of its own per series), judged with
several checks (the system throughput and each instance's) by compare.py and the
group-sequential looks of vgpu/results/sequential.py, Holm within each look.

Two paths, as `vgpu bench` runs them:

- **interleaved**: candidate and reference alternate in ABBA blocks in one session, one
  unjudged warm-up run per side first, looks at even block counts (compare_paired's
  crossover analysis);
- **separate**: the candidate series grows sequentially against a stored reference series
  of 3 repeats, each series at its own level, judged with the uncalibrated default series
  level (compare_samples).

For each true difference (A/A 0%, -2% on the band edge, -5%, -10%) it prints the rates of
FAIL, PASS and INCONCLUSIVE, and the mean blocks (repeats). A FAIL at a difference inside
the band (> -2%) is false; a PASS outside it (< -2%) is false. The parameters come from the
measured A/A (docs/results.md): repeat CV 1.2%, series level 1.0%, a first run 7% slower
(13,889/s against 14,669-15,240/s), 3 instances. The period effect and drift are assumed.

    .venv/bin/python benchmarks/verdict_power.py [--draws 400] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import vgpu.results.compare as compare_module
import vgpu.results.stats as stats_module
from vgpu.results.compare import Band, Check, Verdict, compare_paired, compare_samples, holm
from vgpu.results.noise import uncalibrated
from vgpu.results.sequential import Design, look, with_schedule

TOLERANCE_PCT = 2.0
BAND = Band(lower_pct=-TOLERANCE_PCT)
DIFFERENCES_PCT = (0.0, -2.0, -5.0, -10.0)
MEAN = 5000.0  # per instance


@dataclass(frozen=True)
class Setting:
    """What a simulated session looks like (fractions)."""

    instances: int = 3
    repeat_cv: float = 0.012  # run to run, shared by the instances of a run
    instance_cv: float = 0.008  # each instance's own, on top
    series_sd: float = 0.0098  # between series (the measured A/A's ANOVA estimate)
    cold_first: float = -0.07  # the session's first run
    period: float = -0.01  # the second run of a block
    drift_per_run: float = -0.0005
    warm_up: bool = True
    pilot: int = 4  # blocks (interleaved) or repeats (separate)
    max_blocks: int = 20  # the default budget (--max-repeats)
    looks: int = 3
    reference_repeats: int = 3  # separate series: the stored reference


@dataclass(frozen=True)
class Rates:
    fail: float
    passed: float
    inconclusive: float
    mean_units: float


def memoize_t_quantile() -> None:
    """Memoizes stats.t_quantile (exact arguments, so the same values)."""
    cached = lru_cache(maxsize=None)(stats_module.t_quantile)
    stats_module.t_quantile = cached
    compare_module.t_quantile = cached


def _run(setting: Setting, rng: random.Random, level: float, position: int,
         second: bool) -> list[float]:
    """One run's per-instance throughputs: ``level`` (relative), the run's position in
    the session (cold first run, drift) and whether it is the second of its block."""
    factor = level * (1.0 + setting.drift_per_run * position)
    factor *= math.exp(rng.gauss(0.0, setting.repeat_cv))
    if position == 0:
        factor *= 1.0 + setting.cold_first
    if second:
        factor *= 1.0 + setting.period
    return [MEAN * factor * math.exp(rng.gauss(0.0, setting.instance_cv))
            for _ in range(setting.instances)]


def _checks(candidate: Sequence[list[float]], reference: Sequence[list[float]],
            paired: bool) -> list[Check]:
    """System throughput and each instance's, as judge.py builds them."""
    columns = [("system_throughput", [sum(r) for r in candidate], [sum(r) for r in reference])]
    columns += [(f"throughput i{k}", [r[k] for r in candidate], [r[k] for r in reference])
                for k in range(len(candidate[0]))]
    if paired:
        return holm([compare_paired(name, c, r, BAND) for name, c, r in columns])
    levels = uncalibrated()
    return holm([compare_samples(name, c, r, BAND, levels=levels) for name, c, r in columns])


def interleaved_series(setting: Setting, difference_pct: float,
                       rng: random.Random) -> tuple[Verdict, int]:
    """One `vgpu bench` with its twin: warm-up runs, ABBA blocks, looks at even counts."""
    candidate_level = 1.0 + difference_pct / 100.0
    design = Design(min_repeats=setting.pilot, max_repeats=setting.max_blocks,
                    looks=setting.looks, step=2)
    position = 0
    if setting.warm_up:
        _run(setting, rng, 1.0, 0, False)
        _run(setting, rng, candidate_level, 1, True)
        position = 2
    cand: list[list[float]] = []
    ref: list[list[float]] = []
    total, index = setting.pilot, 1
    while True:
        while len(cand) < total:
            block = len(cand)
            ref_first = block % 2 == 0
            first = _run(setting, rng, 1.0 if ref_first else candidate_level, position, False)
            second = _run(setting, rng, candidate_level if ref_first else 1.0,
                          position + 1, True)
            ref.append(first if ref_first else second)
            cand.append(second if ref_first else first)
            position += 2
        step = look(_checks(cand, ref, paired=True), len(cand), index, design)
        design = with_schedule(design, step)
        if step.stop:
            return step.verdict, len(cand)
        total, index = step.next_total, index + 1


def separate_series(setting: Setting, difference_pct: float,
                    rng: random.Random) -> tuple[Verdict, int]:
    """`vgpu bench --until-decided` against a stored reference series (another session)."""
    ref_level = math.exp(rng.gauss(0.0, setting.series_sd))
    cand_level = (1.0 + difference_pct / 100.0) * math.exp(rng.gauss(0.0, setting.series_sd))
    ref = [_run(setting, rng, ref_level, k + 1, False)
           for k in range(setting.reference_repeats)]
    design = Design(min_repeats=setting.pilot, max_repeats=setting.max_blocks,
                    looks=setting.looks)
    start = 1 if setting.warm_up else 0
    cand: list[list[float]] = []
    total, index = setting.pilot, 1
    while True:
        while len(cand) < total:
            cand.append(_run(setting, rng, cand_level, start + len(cand), False))
        step = look(_checks(cand, ref, paired=False), len(cand), index, design)
        design = with_schedule(design, step)
        if step.stop:
            return step.verdict, len(cand)
        total, index = step.next_total, index + 1


def _rates(results: list[tuple[Verdict, int]]) -> Rates:
    n = len(results)
    return Rates(fail=sum(v == "FAIL" for v, _ in results) / n,
                 passed=sum(v == "PASS" for v, _ in results) / n,
                 inconclusive=sum(v == "INCONCLUSIVE" for v, _ in results) / n,
                 mean_units=sum(u for _, u in results) / n)


def interleaved_rates(setting: Setting, difference_pct: float, draws: int,
                      rng: random.Random) -> Rates:
    return _rates([interleaved_series(setting, difference_pct, rng) for _ in range(draws)])


def separate_rates(setting: Setting, difference_pct: float, draws: int,
                   rng: random.Random) -> Rates:
    return _rates([separate_series(setting, difference_pct, rng) for _ in range(draws)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    memoize_t_quantile()
    rng = random.Random(args.seed)
    base = Setting()
    rows = [("interleaved, warm-up, period term", interleaved_rates, base),
            ("interleaved, no warm-up (cold first run judged)", interleaved_rates,
             replace(base, warm_up=False)),
            ("separate series, uncalibrated default", separate_rates, base)]
    print(f"band >= -{TOLERANCE_PCT:g}%, {args.draws} series per cell, budget "
          f"{base.max_blocks} blocks (repeats), pilot {base.pilot}, {base.looks} looks, "
          f"{base.instances + 1} checks")
    print("| path | true difference | FAIL | PASS | INCONCLUSIVE | mean blocks (repeats) |")
    print("|---|---|---|---|---|---|")
    for name, rates, setting in rows:
        for difference in DIFFERENCES_PCT:
            r = rates(setting, difference, args.draws, rng)
            print(f"| {name} | {difference:+g}% | {r.fail:.1%} | {r.passed:.1%} | "
                  f"{r.inconclusive:.1%} | {r.mean_units:.1f} |")


if __name__ == "__main__":
    main()
