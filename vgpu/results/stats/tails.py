"""Tail latencies pooled over repeats: a p99 from every query (or inter-token gap) of the
runs that stand for one side at one load, with a distribution-free interval from order
statistics, and the VM/bare metal ratio of two such p99s with an interval on the log
scale. A run stores only its count and its largest values
(``loadgen.llm.capacity.tail``), which is all a high quantile and its interval need.

The p99 is the ``ceil(0.99 (N - 1)) + 1``-th smallest of the N pooled values (a latency
some query had: numpy's ``higher`` method, as a run's own p99). Its interval: the ranks
``N q -/+ z sqrt(N q (1 - q))`` (the binomial count of values below the true quantile,
normal approximation), widened to whole ranks; the ratio's interval joins the two
sides' intervals, each at 1 - alpha/2, so that both hold together at least at 1 - alpha
(Bonferroni). ``tail_samples``: how many pooled
values lie above the p99; below ``FEW_TAIL_SAMPLES`` the verdict says so."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vgpu.results.stats.intervals import normal_quantile

QUANTILE = 0.99
FEW_TAIL_SAMPLES = 50


@dataclass(frozen=True)
class PooledQuantile:
    """A pooled quantile (ms) with its interval, the values pooled and those above it;
    ``complete``: the stored tails reached the interval's lower rank."""

    value: float
    low: float
    high: float
    pooled: int
    tail_samples: int
    complete: bool

    def describe(self) -> str:
        few = f", fewer than {FEW_TAIL_SAMPLES}" if self.tail_samples < FEW_TAIL_SAMPLES else ""
        clipped = "" if self.complete else " (lower bound clipped to the stored tails)"
        return (f"{self.value:.2f} ms [{self.low:.2f}, {self.high:.2f}]{clipped} of "
                f"{self.pooled} pooled, {self.tail_samples} tail samples above it{few}")


@dataclass(frozen=True)
class TailRatio:
    """VM over bare metal of two pooled quantiles, with the interval both sides' hold in."""

    vm: PooledQuantile
    bare: PooledQuantile

    @property
    def ratio(self) -> float:
        return self.vm.value / self.bare.value

    @property
    def low(self) -> float:
        return self.vm.low / self.bare.high

    @property
    def high(self) -> float:
        return self.vm.high / self.bare.low


def pooled_quantile(tails: Sequence[Mapping[str, Any]], q: float = QUANTILE,
                    confidence: float = 0.95) -> PooledQuantile | None:
    """The ``q`` quantile of the runs' pooled values from their stored tails (None when
    none were stored or none measured)."""
    n = sum(int(t["n"]) for t in tails)
    top = sorted((float(v) for t in tails for v in t["top_ms"]), reverse=True)
    if n == 0 or not top:
        return None
    z = normal_quantile(0.5 + confidence / 2)
    spread = z * math.sqrt(n * q * (1 - q))
    rank = math.ceil(q * (n - 1)) + 1  # 1-based, from the smallest
    low_rank = max(1, math.floor(n * q - spread))
    high_rank = min(n, math.ceil(n * q + spread) + 1)

    def at(r: int) -> float:
        return top[min(n - r, len(top) - 1)]

    return PooledQuantile(at(rank), at(low_rank), at(high_rank), n, n - rank,
                          n - low_rank < len(top))


def tail_ratio(vm_runs: Sequence[Mapping[str, Any]], bare_runs: Sequence[Mapping[str, Any]],
               latency: str, confidence: float = 0.95) -> TailRatio | None:
    """The pooled p99 of ``latency`` (ttft, tpot, itl) of the VM's runs over bare metal's,
    each side's interval at ``1 - (1 - confidence) / 2``; None when a side stored no
    tails (a record from before tails were kept)."""
    side = 1 - (1 - confidence) / 2
    tails = [[r["tails"][latency] for r in runs if latency in (r.get("tails") or {})]
             for runs in (vm_runs, bare_runs)]
    if any(len(t) != len(vm_runs) for t in tails):
        return None
    vm, bare = pooled_quantile(tails[0], confidence=side), \
        pooled_quantile(tails[1], confidence=side)
    if vm is None or bare is None or min(vm.value, bare.low) <= 0:
        return None
    return TailRatio(vm, bare)
