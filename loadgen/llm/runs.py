"""One run of a capacity search, independent of how it is sent: the load's shape, the SLO,
the budget, each query's timing, the seeded arrivals and prompts, and the summary that
says whether the run is VALID (:func:`summarise`). The client that sends a run over HTTP is
:mod:`loadgen.llm.open_loop`; the slice simulator's virtual clock
(:mod:`loadgen.llm.slice_engine`) computes the same summary without sending it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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
    # what the client spent: its concurrency, CPU, and how late queries left
    client: dict[str, Any] = field(default_factory=dict)


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
