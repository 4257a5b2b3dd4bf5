"""Time to a confident verdict, by simulation: synthetic series of normal repeats (CV 0.5%,
1%, 3%, 10%; true VM-vs-bare-metal differences 0, +-1%, +-2%, +-4%) judged against a 2%
throughput tolerance (band >= -2%) by the real decision code (compare.py's
compare_samples, vgpu/results/sequential.py's looks), sequentially and at fixed n = 3 and
n = 10. The reference (bare-metal) series is fixed: ``--reference`` repeats, drawn anew
for every series. Prints per case the rate of false FAIL, false PASS and INCONCLUSIVE
and the mean repeats; then, at CV 1%, the smallest fixed n that decides as often as the
sequential design and how many repeats the design saves against it.

A true difference inside the band (> -2%) makes a FAIL false; outside (< -2%) a PASS;
exactly on the edge (-2%) both are counted as errors (neither can be concluded).

    .venv/bin/python benchmarks/verdict_power.py [--draws 400] [--seed 1] [--reference 10]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import vgpu.results.compare as compare_module
import vgpu.results.stats as stats_module
from vgpu.results.compare import Band, Verdict, compare_samples
from vgpu.results.sequential import Design, look

CVS_PCT = (0.5, 1.0, 3.0, 10.0)
DIFFERENCES_PCT = (-4.0, -2.0, -1.0, 0.0, 1.0, 2.0, 4.0)
TOLERANCE_PCT = 2.0
BAND = Band(lower_pct=-TOLERANCE_PCT)
FIXED_NS = (3, 10)
MEAN = 1000.0

# One series: (verdict, repeats run) for a candidate drawer and a reference sample.
Method = Callable[[Callable[[], float], Sequence[float]], tuple[Verdict, int]]


def memoize_t_quantile() -> None:
    """Memoizes stats.t_quantile (exact arguments, so the same values): the bisection on
    the incomplete beta function dominates the run time otherwise."""
    cached = lru_cache(maxsize=None)(stats_module.t_quantile)
    stats_module.t_quantile = cached
    compare_module.t_quantile = cached


def fixed(n: int) -> Method:
    def run(draw: Callable[[], float], reference: Sequence[float]) -> tuple[Verdict, int]:
        values = [draw() for _ in range(n)]
        return compare_samples("throughput", values, reference, BAND).verdict, n
    return run


def sequential(design: Design) -> Method:
    def run(draw: Callable[[], float], reference: Sequence[float]) -> tuple[Verdict, int]:
        values = [draw() for _ in range(design.min_repeats)]
        index = 1
        while True:
            step = look([compare_samples("throughput", values, reference, BAND)],
                        len(values), index, design)
            if step.stop:
                return step.verdict, len(values)
            values += [draw() for _ in range(step.next_total - len(values))]
            index += 1
    return run


@dataclass(frozen=True)
class CaseResult:
    cv_pct: float
    difference_pct: float
    false_fail: float
    false_pass: float
    inconclusive: float
    mean_repeats: float

    @property
    def decided(self) -> float:
        return 1.0 - self.inconclusive


def simulate(method: Method, cv_pct: float, difference_pct: float, draws: int,
             rng: random.Random, reference_n: int) -> CaseResult:
    sigma = MEAN * cv_pct / 100.0
    candidate_mean = MEAN * (1.0 + difference_pct / 100.0)
    counts = {"PASS": 0, "FAIL": 0, "INCONCLUSIVE": 0}
    repeats = 0
    for _ in range(draws):
        reference = [rng.gauss(MEAN, sigma) for _ in range(reference_n)]
        verdict, n = method(lambda: rng.gauss(candidate_mean, sigma), reference)
        counts[verdict] += 1
        repeats += n
    inside = difference_pct >= -TOLERANCE_PCT
    outside = difference_pct <= -TOLERANCE_PCT
    return CaseResult(
        cv_pct=cv_pct, difference_pct=difference_pct,
        false_fail=counts["FAIL"] / draws if inside else 0.0,
        false_pass=counts["PASS"] / draws if outside else 0.0,
        inconclusive=counts["INCONCLUSIVE"] / draws, mean_repeats=repeats / draws,
    )


def table(methods: dict[str, Method], draws: int, seed: int,
          reference_n: int) -> dict[str, list[CaseResult]]:
    rng = random.Random(seed)
    return {name: [simulate(method, cv, diff, draws, rng, reference_n)
                   for cv in CVS_PCT for diff in DIFFERENCES_PCT]
            for name, method in methods.items()}


def off_edge(cases: list[CaseResult], cv_pct: float) -> list[CaseResult]:
    return [c for c in cases if c.cv_pct == cv_pct and c.difference_pct != -TOLERANCE_PCT]


def fixed_sweep(cv_pct: float, draws: int, seed: int, reference_n: int,
                ns: Sequence[int]) -> dict[int, float]:
    """Fixed n -> mean decided rate over the off-edge differences at ``cv_pct``."""
    rng = random.Random(seed)
    diffs = [d for d in DIFFERENCES_PCT if d != -TOLERANCE_PCT]
    return {n: sum(simulate(fixed(n), cv_pct, d, draws, rng, reference_n).decided
                   for d in diffs) / len(diffs) for n in ns}


def print_savings(sequential_cases: list[CaseResult], draws: int, seed: int,
                  reference_n: int, cap: int) -> None:
    """At CV 1%: the sequential design's decided rate and mean repeats beside fixed n's;
    the smallest fixed n deciding as often (within 2 points, the simulation's noise)."""
    cases = off_edge(sequential_cases, 1.0)
    decided = sum(c.decided for c in cases) / len(cases)
    mean_n = sum(c.mean_repeats for c in cases) / len(cases)
    print(f"\nCV 1%, off-edge differences: sequential decides {decided:.1%} "
          f"with {mean_n:.1f} repeats on average")
    sweep = fixed_sweep(1.0, draws, seed, reference_n, [3, 5, 7, 10, 13, 16, cap])
    for n, rate in sweep.items():
        print(f"  fixed n = {n:2d}: decides {rate:.1%}")
    same = [n for n, rate in sweep.items() if rate >= decided - 0.02]
    if same:
        print(f"fixed n = {same[0]} decides as often: the sequential design runs "
              f"{1 - mean_n / same[0]:.0%} fewer repeats")


def print_table(results: dict[str, list[CaseResult]]) -> None:
    print(f"band >= -{TOLERANCE_PCT:g}%; rates in % of series; n = mean repeats")
    header = "| CV | true diff | " + " | ".join(
        f"{name}: false FAIL / false PASS / INCONCL. / n" for name in results) + " |"
    print(header)
    print("|" + "---|" * (2 + len(results)))
    rows = zip(*results.values(), strict=True)
    for row in rows:
        first = row[0]
        cells = [f"{c.false_fail:.1%} / {c.false_pass:.1%} / {c.inconclusive:.0%} / "
                 f"{c.mean_repeats:.1f}" for c in row]
        print(f"| {first.cv_pct:g}% | {first.difference_pct:+g}% | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reference", type=int, default=10, help="reference repeats")
    parser.add_argument("--max-repeats", type=int, default=20)
    args = parser.parse_args()
    memoize_t_quantile()
    design = Design(max_repeats=args.max_repeats)
    methods = {"sequential": sequential(design),
               **{f"fixed n={n}": fixed(n) for n in FIXED_NS}}
    results = table(methods, args.draws, args.seed, args.reference)
    print_table(results)
    worst_fail = max(c.false_fail for c in results["sequential"])
    worst_pass = max(c.false_pass for c in results["sequential"])
    print(f"\nsequential: worst false FAIL {worst_fail:.1%}, worst false PASS {worst_pass:.1%}")
    print_savings(results["sequential"], args.draws, args.seed + 1, args.reference,
                  args.max_repeats)


if __name__ == "__main__":
    main()
