"""Verdicts that decide, by simulation through the real decision code: series of runs
with the effects a real session has (repeat noise, a cold first run, a period effect
inside each block, drift over the session, a level of its own per series), judged with
several checks (the system throughput and each instance's) by compare.py and the
group-sequential looks of vgpu/results/verdict/sequential.py, Holm within each look.

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
The row "this machine's real noise" takes the noise of real 3 s runs recorded here
(docs/results.md: block log ratios of the system throughput with an sd of 5.9%, i.e. a run
CV of 4.2% shared by the instances) with no period effect or drift.

The **Server** rows judge what a Server series at a fixed offered rate has (judge.py: its
samples/s is the offered rate and is not judged; the worst p99 of the instances per run,
band <= +5%, the scenario's default latency tolerance). Each instance's p99 follows the
run's throughput factors inverted (a slower run waits longer: cold first run, period, drift,
the series level and the true difference, with elasticity LATENCY_ELASTICITY) times its own
noise: CV 3% per run shared by the instances plus 2% per instance (assumed: a tail
percentile of a short run varies more than its mean rate). A -5% throughput difference is
then a +5.3% p99, just outside its band, and -10% a +11%. The separate path judges the
latency with the uncalibrated default series level of a p99 (23.5%), as an uncalibrated
class would be.

    .venv/bin/python benchmarks/verdict_power.py [--draws 400] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import vgpu.results.stats.intervals as stats_module
import vgpu.results.verdict.compare as compare_module
from vgpu.bench.setaside import MAX_REPLACED_BLOCKS
from vgpu.results.stats.intervals import ALPHA
from vgpu.results.stats.noise import uncalibrated
from vgpu.results.stats.spending import look_level
from vgpu.results.verdict.allowance import allowance, holds_with, slowdown_seen
from vgpu.results.verdict.compare import (
    Band,
    Check,
    Verdict,
    carry_over,
    compare_paired,
    compare_samples,
    holm,
)
from vgpu.results.verdict.sequential import (
    DEFAULT_LOOKS,
    DEFAULT_MAX_BLOCKS,
    DEFAULT_MAX_REPEATS,
    Design,
    look,
    schedule,
    with_schedule,
)

TOLERANCE_PCT = 2.0
REAL_RUN_CV = 0.0416  # 5.9% block sd / sqrt(2): real 3 s runs of scenario 6 here
BAND = Band(lower_pct=-TOLERANCE_PCT)
DIFFERENCES_PCT = (0.0, -2.0, -5.0, -10.0)
MEAN = 5000.0  # per instance


LATENCY_TOLERANCE_PCT = 5.0  # Tolerances.latency_pct's default
LATENCY_BAND = Band(upper_pct=LATENCY_TOLERANCE_PCT)
LATENCY_ELASTICITY = 1.0  # p99 rises as 1 / throughput factor ** this
P99_MS = 20.0


@dataclass(frozen=True)
class Run:
    """One simulated run: each instance's throughput, and the worst instance p99."""

    throughputs: list[float]
    worst_p99_ms: float


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
    max_blocks: int = DEFAULT_MAX_BLOCKS  # the default budget of interleaved blocks
    max_repeats: int = DEFAULT_MAX_REPEATS  # ... and of a separate series' repeats
    looks: int = DEFAULT_LOOKS
    reference_repeats: int = 3  # separate series: the stored reference
    server: bool = False  # judge the worst p99 too (a Server series)
    latency_cv: float = 0.03  # p99 run to run, shared by the instances of a run
    latency_instance_cv: float = 0.02  # each instance's p99, on top
    tails: str = "normal"  # or "t3": Student's t with 3 df, scaled to the same sd
    disturbed_share: float = 0.0  # share of candidate (VM) runs slowed and marked
    disturbed_slowdown: float = 0.10  # ... by this much
    family: int = 1  # the workloads the command judges as one family (a FAIL at 1/family)


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


def _noise(setting: Setting, rng: random.Random, sd: float) -> float:
    """A log-scale draw of standard deviation ``sd``: normal, or t(3) scaled to it."""
    if setting.tails == "t3":
        chi2 = sum(rng.gauss(0.0, 1.0) ** 2 for _ in range(3))
        return sd * rng.gauss(0.0, 1.0) / math.sqrt(chi2 / 3.0) / math.sqrt(3.0)
    return rng.gauss(0.0, sd)


def _run(setting: Setting, rng: random.Random, level: float, position: int,
         second: bool) -> Run:
    """One run: ``level`` (relative), the run's position in the session (cold first run,
    drift) and whether it is the second of its block set its throughput factor; each
    instance's throughput and p99 follow it, with their own noise."""
    factor = level * (1.0 + setting.drift_per_run * position)
    if position == 0:
        factor *= 1.0 + setting.cold_first
    if second:
        factor *= 1.0 + setting.period
    throughput = factor * math.exp(_noise(setting, rng, setting.repeat_cv))
    wait = factor ** -LATENCY_ELASTICITY * math.exp(rng.gauss(0.0, setting.latency_cv))
    return Run([MEAN * throughput * math.exp(rng.gauss(0.0, setting.instance_cv))
                for _ in range(setting.instances)],
               max(P99_MS * wait * math.exp(rng.gauss(0.0, setting.latency_instance_cv))
                   for _ in range(setting.instances)))


def _columns(candidate: Sequence[Run], reference: Sequence[Run],
             server: bool) -> list[tuple[str, Band, list[float], list[float]]]:
    """System throughput and each instance's, or for a Server series (a fixed offered
    rate: its samples/s is that rate, not judged) the worst p99, as judge.py builds them:
    one Holm family."""
    if server:
        return [("latency_p99_worst", LATENCY_BAND, [r.worst_p99_ms for r in candidate],
                 [r.worst_p99_ms for r in reference])]
    columns = [("system_throughput", BAND, [sum(r.throughputs) for r in candidate],
                [sum(r.throughputs) for r in reference])]
    instances = len(candidate[0].throughputs)
    return columns + [(f"throughput i{k}", BAND, [r.throughputs[k] for r in candidate],
                       [r.throughputs[k] for r in reference])
                      for k in range(instances if instances > 1 else 0)]


def _checks(candidate: Sequence[Run], reference: Sequence[Run], paired: bool,
            server: bool, blocks: Sequence[int] | None = None, family: int = 1) -> list[Check]:
    """The comparison's checks, Holm at its share of the command's family (one_family)."""
    columns = _columns(candidate, reference, server)
    share = ALPHA / 2 / family
    if paired:
        return holm([compare_paired(name, c, r, band, blocks=blocks)
                     for name, band, c, r in columns], share, family)
    levels = uncalibrated()
    return holm([compare_samples(name, c, r, band, levels=levels)
                 for name, band, c, r in columns], share, family)


def _hold_with_allowance(checks: Sequence[Check], cand: Sequence[Run],
                         aside: Sequence[tuple[Run, Run, int]], server: bool,
                         level: float) -> bool:
    """Whether every check's PASS holds at ``level`` with the allowance for the
    candidate's disturbed runs (vgpu.results.verdict.allowance), as judge.py makes it."""
    clean = _columns(cand, cand, server)
    seen = _columns([c for c, _, _ in aside], [c for c, _, _ in aside], server) \
        if aside else [(name, band, [], []) for name, band, _, _ in clean]
    blocks = len(cand) + len(aside)
    return all(holds_with(check, allowance(len(aside), blocks,
                                           slowdown_seen(values, disturbed, band)), level)
               for check, (_, band, values, _), (_, _, disturbed, _)
               in zip(checks, clean, seen, strict=True))


def interleaved_series(setting: Setting, difference_pct: float,
                       rng: random.Random) -> tuple[Verdict, int]:
    """One `vgpu bench` with its twin, as it runs: warm-up runs, ABBA blocks, the pilot
    and the planned looks at even counts; a block whose candidate run was disturbed set
    aside and run again (at most MAX_REPLACED_BLOCKS times, then INCONCLUSIVE), and a
    PASS held to the allowance for the candidate's disturbed runs (vgpu.results.verdict.allowance,
    as judge.py makes it: their share's upper bound over every block run, set-aside ones
    included, times their slowdown, the default when none was seen); the carry-over check
    at a look that would decide. ``difference_pct``: the true loss of the candidate's
    runs, disturbed ones included (on the log scale)."""
    slow = setting.disturbed_share * math.log1p(-setting.disturbed_slowdown)
    candidate_level = math.exp(math.log1p(difference_pct / 100.0) - slow)
    design = Design(min_repeats=setting.pilot, max_repeats=setting.max_blocks,
                    looks=setting.looks, step=2, family=setting.family)
    position = 0
    if setting.warm_up:
        _run(setting, rng, 1.0, 0, False)
        _run(setting, rng, candidate_level, 1, True)
        position = 2
    cand: list[Run] = []
    ref: list[Run] = []
    aside: list[tuple[Run, Run, int]] = []  # set aside: candidate, reference, block
    total, index = setting.pilot, 1
    while True:
        while len(cand) < total:
            block = len(cand)
            ref_first = block % 2 == 0
            disturbed = rng.random() < setting.disturbed_share
            level = candidate_level * (1.0 - setting.disturbed_slowdown) if disturbed \
                else candidate_level
            first = _run(setting, rng, 1.0 if ref_first else level, position, False)
            second = _run(setting, rng, level if ref_first else 1.0, position + 1, True)
            position += 2
            c_run, r_run = (second, first) if ref_first else (first, second)
            if disturbed:
                if len(aside) >= MAX_REPLACED_BLOCKS:
                    return "INCONCLUSIVE", len(cand) + len(aside) + 1
                aside.append((c_run, r_run, block))
                continue
            ref.append(r_run)
            cand.append(c_run)
        checks = _checks(cand, ref, paired=True, server=setting.server,
                         family=setting.family)
        plan = design.schedule or schedule(len(cand), design.max_repeats, design)
        n = len(cand)
        at = next((k for k, t in enumerate(plan) if t >= n), len(plan) - 1)
        level_now = look_level(plan, at, at == len(plan) - 1, design.alpha,
                               design.spending)
        blocked = not _hold_with_allowance(checks, cand, aside, setting.server, level_now)
        name, _, c_values, r_values = _columns(cand, ref, setting.server)[0]
        found = carry_over(name, c_values, r_values, list(range(len(cand))))
        confounded = [found.describe()] if found is not None and found.found else []
        step = look(checks, len(cand), index, design, blocked, (), confounded)
        design = with_schedule(design, step)
        if step.stop:
            return step.verdict, len(cand) + len(aside)
        total, index = step.next_total, index + 1


def separate_series(setting: Setting, difference_pct: float,
                    rng: random.Random) -> tuple[Verdict, int]:
    """`vgpu bench --until-decided` against a stored reference series (another session)."""
    ref_level = math.exp(rng.gauss(0.0, setting.series_sd))
    cand_level = (1.0 + difference_pct / 100.0) * math.exp(rng.gauss(0.0, setting.series_sd))
    ref = [_run(setting, rng, ref_level, k + 1, False)
           for k in range(setting.reference_repeats)]
    design = Design(min_repeats=setting.pilot, max_repeats=setting.max_repeats,
                    looks=setting.looks)
    start = 1 if setting.warm_up else 0
    cand: list[Run] = []
    total, index = setting.pilot, 1
    while True:
        while len(cand) < total:
            cand.append(_run(setting, rng, cand_level, start + len(cand), False))
        step = look(_checks(cand, ref, paired=False, server=setting.server), len(cand),
                    index, design)
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


def _mc(rate: float, draws: int) -> float:
    """The Monte Carlo standard error of a rate measured over ``draws`` series."""
    return math.sqrt(max(rate * (1.0 - rate), 1e-12) / draws)


def gate_rows(draws: int, family_draws: int) -> list[tuple[str, int, Setting, float]]:
    """The gate as the main job runs it (one check: the VM's system throughput against
    bare metal), and beside it families of 4 and 12 checks (3 and 11 instances)."""
    one = Setting(instances=1)
    t3 = replace(one, tails="t3")
    disturbed = replace(one, disturbed_share=0.06)
    rows = [(f"1 check{note}", draws, setting, difference)
            for note, setting in (("", one), (", t(3) tails", t3),
                                  (", 6% of VM runs 10% slower, disturbed", disturbed))
            for difference in (0.0, -2.0, -5.0)]
    rows += [(f"{checks} checks", family_draws, replace(one, instances=checks - 1),
              difference) for checks in (4, 12) for difference in (0.0, -2.0, -5.0)]
    # the main job judges its 3 workloads as one family: each workload's FAIL at 0.83%
    rows += [(f"{checks} check{'s' if checks > 1 else ''}, a workload of a family of 3",
              family_draws, replace(one, instances=max(1, checks - 1), family=3), difference)
             for checks in (1, 4) for difference in (0.0, -2.0, -5.0)]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20000,
                        help="series per cell of the one-check gate")
    parser.add_argument("--family-draws", type=int, default=20000,
                        help="series per cell of the 4- and 12-check families")
    parser.add_argument("--path-draws", type=int, default=0,
                        help="series per cell of the other paths (0: not run)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", default="",
                        help="run only the gate rows whose family names contain this")
    args = parser.parse_args()
    memoize_t_quantile()
    rng = random.Random(args.seed)
    base = Setting()
    print(f"band >= -{TOLERANCE_PCT:g}%, interleaved ABBA with warm-up runs, run CV "
          f"{base.repeat_cv:.1%} (block sd {base.repeat_cv * math.sqrt(2):.1%}), pilot "
          f"{base.pilot} blocks, {base.looks} fixed looks to {base.max_blocks} blocks "
          "(Hwang-Shih-DeCani gamma -2), set-aside, the allowance for disturbed runs "
          "and the carry-over check on; true "
          "difference on the log scale, disturbed runs included; +- is the Monte Carlo "
          "standard error")
    print("| family | true difference | series | FAIL | PASS | INCONCLUSIVE | "
          "mean blocks |")
    print("|---|---|---|---|---|---|---|")
    for name, draws, setting, difference in gate_rows(args.draws, args.family_draws):
        if args.only not in name:
            continue
        # a stream per row: rows run apart (or in parallel) draw what they draw together
        r = interleaved_rates(setting, difference, draws,
                              random.Random(f"{args.seed}:{name}:{difference:g}"))
        print(f"| {name} | {difference:+g}% | {draws} | {r.fail:.2%} +- "
              f"{_mc(r.fail, draws):.2%} | {r.passed:.2%} +- {_mc(r.passed, draws):.2%} | "
              f"{r.inconclusive:.1%} | {r.mean_units:.1f} |", flush=True)
    if args.path_draws <= 0:
        return
    rows = [("interleaved, warm-up, period term", interleaved_rates, base),
            ("interleaved, no warm-up (cold first run judged)", interleaved_rates,
             replace(base, warm_up=False)),
            ("interleaved, this machine's real noise (block sd 5.9%)", interleaved_rates,
             replace(base, repeat_cv=REAL_RUN_CV, period=0.0, drift_per_run=0.0)),
            ("separate series, uncalibrated default", separate_rates, base),
            ("Server: interleaved, p99 latency", interleaved_rates,
             replace(base, server=True)),
            ("Server: separate series, p99 latency", separate_rates,
             replace(base, server=True))]
    print(f"\n{args.path_draws} series per cell, {base.instances + 1} checks (Server: "
          f"the p99 alone, latency band <= +{LATENCY_TOLERANCE_PCT:g}%, p99 CV "
          f"{base.latency_cv:.0%} per run + {base.latency_instance_cv:.0%} per instance)")
    print("| path | true difference | FAIL | PASS | INCONCLUSIVE | mean blocks (repeats) |")
    print("|---|---|---|---|---|---|")
    for name, rates, setting in rows:
        for difference in DIFFERENCES_PCT:
            r = rates(setting, difference, args.path_draws, rng)
            print(f"| {name} | {difference:+g}% | {r.fail:.1%} | {r.passed:.1%} | "
                  f"{r.inconclusive:.1%} | {r.mean_units:.1f} |", flush=True)


if __name__ == "__main__":
    main()
