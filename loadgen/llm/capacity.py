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
import http.client
import json
import math
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from loadgen.llm.openai_client import thread_connection
from loadgen.llm.stream import StreamedAnswer, read_stream

TIMEOUT_S = 120.0
PERCENTILE_METHOD = "higher"  # a p99 is a latency some query had, never an interpolation


@dataclass(frozen=True)
class LoadShape:
    """What each query asks: a prompt of ``input_min..input_max`` tokens (seeded per query
    index) and exactly ``output_tokens`` tokens."""

    input_min: int = 16
    input_max: int = 48
    output_tokens: int = 16
    vocab: int = 32000


@dataclass(frozen=True)
class Slo:
    ttft_ms: float
    tpot_ms: float


@dataclass(frozen=True)
class Budget:
    """How much a search may spend: at most ``runs`` runs (the final repeat included) of
    ``max(min_queries, rate x duration_s)`` queries; bisection stops once the bracket is
    narrower than ``resolution`` (a fraction)."""

    runs: int = 8
    # a lab's default: p99 from 10 tail queries; tests pass their own, smaller budgets
    min_queries: int = 1000
    duration_s: float = 30.0
    resolution: float = 0.02

    def queries(self, rate: float) -> int:
        return max(self.min_queries, math.ceil(rate * self.duration_s))


@dataclass
class QueryTiming:
    """One query on the run's clock (s from the run's start)."""

    scheduled: float
    first: float | None = None
    last: float | None = None
    tokens: int = 0
    gaps: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def ttft(self) -> float | None:
        return None if self.first is None else self.first - self.scheduled

    @property
    def tpot(self) -> float | None:
        if self.first is None or self.last is None or self.tokens < 2:
            return None
        return (self.last - self.first) / (self.tokens - 1)


@dataclass
class RunResult:
    """One run at a scheduled rate; latencies in ms."""

    rate: float
    queries: int
    valid: bool
    reasons: list[str]
    failed: int
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    tpot_mean_ms: float | None
    itl_p99_ms: float | None
    itl_p999_ms: float | None
    longest_stall_ms: float | None
    goodput: float
    output_tokens: int
    # per latency (ttft, tpot, itl): how many values the run had and its largest ones,
    # enough to pool a p99 with its order-statistic interval over repeats
    tails: dict[str, dict[str, Any]] = field(default_factory=dict)


TAIL_SHARE = 0.05  # the share of a run's largest latencies kept (plus TAIL_EXTRA)
TAIL_EXTRA = 10


def tail(values_s: Sequence[float]) -> dict[str, Any]:
    """A latency's count and its largest values (ms, descending)."""
    keep = min(len(values_s), math.ceil(TAIL_SHARE * len(values_s)) + TAIL_EXTRA)
    top = sorted(values_s, reverse=True)[:keep]
    return {"n": len(values_s), "top_ms": [round(v * 1e3, 4) for v in top]}


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    return float(np.percentile(np.asarray(values) * 1e3, q, method=PERCENTILE_METHOD))


def _ms(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.2f} ms"


def summarise(rate: float, timings: Sequence[QueryTiming], slo: Slo,
              min_queries: int) -> RunResult:
    """A run's numbers and whether it is VALID: every query answered in full, at least
    ``min_queries``, p99 TTFT and p99 TPOT within the SLO."""
    for t in timings:
        if t.error is None and t.first is None:
            t.error = "no token arrived"
    failed = [t for t in timings if t.error is not None]
    ok = [t for t in timings if t.error is None]
    ttft = [t.ttft for t in ok if t.ttft is not None]
    tpot = [t.tpot for t in ok if t.tpot is not None]
    gaps = [g for t in ok for g in t.gaps]
    ttft_p99, tpot_p99 = _pct(ttft, 99), _pct(tpot, 99)
    reasons: list[str] = []
    if failed:
        reasons.append(f"{len(failed)} queries failed, the first: {failed[0].error}")
    if len(timings) < min_queries:
        reasons.append(f"{len(timings)} queries, fewer than {min_queries}")
    if ttft_p99 is None or ttft_p99 > slo.ttft_ms:
        reasons.append(f"p99 TTFT {_ms(ttft_p99)} over {slo.ttft_ms:g} ms")
    if tpot_p99 is None or tpot_p99 > slo.tpot_ms:
        reasons.append(f"p99 TPOT {_ms(tpot_p99)} over {slo.tpot_ms:g} ms")
    good = sum(1 for t in ok if t.ttft is not None and t.ttft * 1e3 <= slo.ttft_ms
               and (t.tpot is None or t.tpot * 1e3 <= slo.tpot_ms))
    ends = [t.last for t in ok if t.last is not None]
    span = (max(ends) - min(t.scheduled for t in timings)) if ends else 0.0
    return RunResult(
        rate=rate, queries=len(timings), valid=not reasons, reasons=reasons,
        failed=len(failed), ttft_p99_ms=ttft_p99, tpot_p99_ms=tpot_p99,
        tpot_mean_ms=float(np.mean(tpot) * 1e3) if tpot else None,
        itl_p99_ms=_pct(gaps, 99), itl_p999_ms=_pct(gaps, 99.9),
        longest_stall_ms=max(gaps) * 1e3 if gaps else None,
        goodput=good / span if span > 0 else 0.0,
        output_tokens=sum(t.tokens for t in ok),
        tails={"ttft": tail(ttft), "tpot": tail(tpot), "itl": tail(gaps)})


def unit_arrivals(seed: int, repeat: int, count: int) -> np.ndarray:
    """Arrival times of a rate-1 Poisson process, seeded per repeat; a run at rate r
    divides them by r, so every rate of a repeat sees the same pattern."""
    rng = np.random.default_rng([seed, repeat, 0])
    return np.cumsum(rng.exponential(1.0, count))


def prompt_length(seed: int, repeat: int, index: int, shape: LoadShape) -> int:
    rng = np.random.default_rng([seed, repeat, 1, index])
    return int(rng.integers(shape.input_min, shape.input_max + 1))


def make_prompt(seed: int, repeat: int, run: int, index: int, shape: LoadShape) -> list[int]:
    """A prompt no other query of the search shares a prefix with: its first tokens spell
    the run and the query index, the rest is seeded noise."""
    length = prompt_length(seed, repeat, index, shape)
    rng = np.random.default_rng([seed, repeat, 2, run, index])
    head = [run % shape.vocab, index // shape.vocab % shape.vocab, index % shape.vocab]
    body = rng.integers(0, shape.vocab, size=max(0, length - len(head))).tolist()
    return (head + body)[:length]


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


class EndpointClient:
    """Streams completions from an OpenAI-compatible endpoint, one keep-alive connection
    per worker thread."""

    def __init__(self, url: str, model: str) -> None:
        parts = urlsplit(url)
        self.url, self.model = url, model
        self.host, self.port = parts.hostname or "localhost", parts.port
        self.base = parts.path.rstrip("/")
        self.https = parts.scheme == "https"
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        return thread_connection(self._local, self.host, self.port, self.https, TIMEOUT_S)

    def stream(self, prompt: list[int], max_tokens: int) -> StreamedAnswer:
        body = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens,
                "min_tokens": max_tokens, "ignore_eos": True, "temperature": 0.0,
                "stream": True, "return_token_ids": True,
                "stream_options": {"include_usage": True}}
        connection = self._connection()
        try:
            connection.request("POST", f"{self.base}/v1/completions", json.dumps(body),
                               {"Content-Type": "application/json"})
            response = connection.getresponse()
            if response.status != 200:
                detail = response.read()[:200].decode(errors="replace")
                return StreamedAnswer(error=f"{self.url} answered {response.status}: {detail}")
            answer = read_stream(iter(response.readline, b""))
            response.read()
            return answer
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            self._local.connection = None
            return StreamedAnswer(error=f"{self.url} did not answer: {exc}")


def endpoint_run(client: EndpointClient, rate: float, run: int, shape: LoadShape, slo: Slo,
                 seed: int, repeat: int, budget: Budget, workers: int = 256) -> RunResult:
    """One open-loop run at ``rate`` against the endpoint."""
    count = budget.queries(rate)
    at = unit_arrivals(seed, repeat, count) / rate
    prompts = [make_prompt(seed, repeat, run, i, shape) for i in range(count)]
    timings = [QueryTiming(float(t)) for t in at]

    def query(i: int, start: float) -> None:
        timing = timings[i]
        try:
            answer = client.stream(prompts[i], shape.output_tokens)
        except Exception as exc:  # a worker's exception would vanish into its future
            timing.error = f"{type(exc).__name__}: {exc}"
            return
        timing.error = answer.check(shape.output_tokens)
        if answer.first_s is not None and answer.last_s is not None:
            timing.first, timing.last = answer.first_s - start, answer.last_s - start
        timing.tokens = answer.token_count()
        timing.gaps = answer.gaps_s()

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="capacity") as pool:
        start = time.perf_counter()
        for i, t in enumerate(at):
            if (pause := start + t - time.perf_counter()) > 0:
                time.sleep(pause)
            pool.submit(query, i, start)
    return summarise(rate, timings, slo, budget.min_queries)


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
    parser.add_argument("--output-tokens", type=int, default=LoadShape.output_tokens)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    shape = LoadShape(output_tokens=args.output_tokens)
    slo = Slo(args.ttft_ms, args.tpot_ms)
    budget = Budget(args.runs, args.min_queries, args.duration_s)
    client = EndpointClient(args.url, args.model)

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
