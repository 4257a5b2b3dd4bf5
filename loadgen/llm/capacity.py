"""Capacity at a latency SLO, as MLPerf Inference's Server scenario states a result: the
highest Poisson request rate whose run is VALID, with p99 time to first token and p99 time
per output token within their targets. Each run sends seeded Poisson arrivals (the same
unit-rate pattern for every rate of a repeat, scaled) of unique prompts (no prefix a
server could cache; lengths seeded per query index) to an OpenAI-compatible endpoint,
open loop: a query's latency counts from its scheduled arrival, so a client or server that
falls behind shows as latency. The search brackets the capacity by doubling or halving,
bisects geometrically within a stated budget of runs, and reruns the final point: the
capacity (the highest rate whose run was VALID) is confirmed only if that rerun is VALID
too; the highest rate VALID every time it ran is stated beside it. Every run records goodput
(requests/s meeting both SLOs), time per output token and every inter-token gap (p99,
p99.9, the longest stall). ``python -m loadgen.llm.capacity`` writes the search as JSON."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from loadgen.llm.open_loop import EndpointClient, endpoint_run
from loadgen.llm.rules import CLIENT_CONCURRENCY, RUN_TO_TTFT, capacity_run_seconds
from loadgen.llm.runs import Budget, LoadShape, RunResult, Slo

Measure = Callable[[float, int], RunResult]  # (rate, run number) -> the run


@dataclass
class CapacityResult:
    """``capacity``: the search's final point, the highest rate whose run was VALID
    (queries/s; 0 if none); ``confirmed``: its rerun was VALID too;
    ``confirmed_capacity``: the highest rate VALID every time it ran."""

    capacity: float
    confirmed: bool
    confirmed_capacity: float
    runs: list[RunResult]

    def to_json(self) -> dict[str, Any]:
        return {"capacity_qps": self.capacity, "confirmed": self.confirmed,
                "confirmed_capacity_qps": self.confirmed_capacity,
                "runs": [asdict(r) for r in self.runs]}


def _always_valid(runs: Sequence[RunResult]) -> float:
    rates = {r.rate for r in runs}
    return max((rate for rate in rates
                if all(r.valid for r in runs if r.rate == rate)), default=0.0)


def find_capacity(measure: Measure, start_qps: float, budget: Budget) -> CapacityResult:
    """Bracket, bisect and confirm within ``budget.runs`` runs (at least 3)."""
    if budget.runs < 3:
        raise ValueError("a capacity search needs at least 3 runs: bracket both sides and "
                         "repeat the final point")
    runs: list[RunResult] = []

    def run(rate: float) -> RunResult:
        result = measure(rate, len(runs))
        runs.append(result)
        return result

    lo, hi = 0.0, math.inf
    rate = start_qps
    while len(runs) < budget.runs - 1 and (lo == 0.0 or hi == math.inf):
        if run(rate).valid:
            lo = rate
            rate = rate * 2 if hi == math.inf else rate
        else:
            hi = rate
            rate = rate / 2
        if lo and hi < math.inf:
            break
    while len(runs) < budget.runs - 1 and lo and hi < math.inf \
            and hi / lo > 1 + budget.resolution:
        mid = math.sqrt(lo * hi)
        if run(mid).valid:
            lo = mid
        else:
            hi = mid
    if not lo:
        return CapacityResult(0.0, False, 0.0, runs)
    confirmed = run(lo).valid
    return CapacityResult(lo, confirmed, _always_valid(runs), runs)


RepeatMeasure = Callable[[int], Measure]  # repeat -> its Measure


def search_repeats(measure_for: RepeatMeasure, repeats: int, start_qps: float,
                   budget: Budget) -> list[dict[str, Any]]:
    """A capacity search per repeat (each repeat its own arrival seed), as stored."""
    return [{"repeat": repeat, **find_capacity(measure_for(repeat), start_qps,
                                               budget).to_json()}
            for repeat in range(repeats)]


def matched_repeats(measure_for: RepeatMeasure,
                    reference: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One run per repeat at the reference's capacity for that repeat (the matched load
    of a verdict: the VM at bare metal's capacity)."""
    return [{"repeat": r["repeat"], "rate": r["capacity_qps"],
             "matched": asdict(measure_for(r["repeat"])(r["capacity_qps"], 0))}
            for r in reference]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadgen.llm.capacity",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", default="vgpu-tiny-decoder")
    parser.add_argument("--ttft-ms", type=float, required=True)
    parser.add_argument("--tpot-ms", type=float, required=True)
    parser.add_argument("--start-qps", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", type=int, default=Budget.runs)
    parser.add_argument("--min-queries", type=int, default=Budget.min_queries)
    parser.add_argument("--duration-s", type=float, default=Budget.duration_s)
    parser.add_argument("--matched-to", type=Path, default=None,
                        help="a search's JSON (bare metal's): run once per repeat at its "
                        "capacity instead of searching")
    parser.add_argument("--concurrency", type=int, default=CLIENT_CONCURRENCY,
                        help="most queries in flight at once")
    parser.add_argument("--output-tokens", type=int, default=LoadShape.output_tokens)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    shape = LoadShape(output_tokens=args.output_tokens)
    slo = Slo(args.ttft_ms, args.tpot_ms)
    budget = Budget(args.runs, args.min_queries,
                    capacity_run_seconds(args.duration_s, args.ttft_ms))
    if budget.duration_s > args.duration_s:
        print(f"note: runs of {budget.duration_s:g} s, not --duration-s {args.duration_s:g}: "
              f"a run lasts at least {RUN_TO_TTFT} TTFT targets, or an overloaded server's "
              "growing queue could pass for capacity", file=sys.stderr)
    if args.concurrency < 1:
        print(f"error: --concurrency {args.concurrency}: at least 1 query must be in "
              "flight; give --concurrency 1 or more", file=sys.stderr)
        return 2
    client = EndpointClient(args.url, args.model, args.concurrency)

    def measure_for(repeat: int) -> Measure:
        return lambda rate, run: endpoint_run(client, rate, run, shape, slo, args.seed,
                                              repeat, budget)

    if args.runs < 3:
        print(f"error: --runs {args.runs}: a search needs at least 3 runs (bracket both "
              "sides and rerun the final point); give --runs 3 or more", file=sys.stderr)
        return 2
    if args.matched_to is not None:
        try:
            reference = json.loads(args.matched_to.read_text())["repeats"]
            if not all(isinstance(r.get("capacity_qps"), int | float)
                       and isinstance(r.get("repeat"), int) for r in reference):
                raise ValueError("every repeat needs capacity_qps and repeat")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            print(f"error: {args.matched_to}: repeats: not a capacity search "
                  f"({type(exc).__name__}: {exc}); give --matched-to the JSON a search "
                  "without --matched-to wrote", file=sys.stderr)
            return 2
        repeats = matched_repeats(measure_for, reference)
    else:
        repeats = search_repeats(measure_for, args.repeats, args.start_qps, budget)
    args.out.write_text(json.dumps({
        "url": args.url, "seed": args.seed, "slo_ms": asdict(slo), "shape": asdict(shape),
        "budget": asdict(budget), "repeats": repeats}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
