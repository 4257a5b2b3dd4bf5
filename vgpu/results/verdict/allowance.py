"""An allowance for the candidate's disturbed runs (pure): in an interleaved session a
block whose candidate run was disturbed (steal, throttled clocks, other load: seen only
on that side) is set aside and run again (vgpu.bench.setaside), so the blocks judged are
the clean ones. If the candidate's machine is disturbed in a share ``p`` of its runs and a
disturbed run is ``s`` slower, the candidate as it runs is ``p * s`` slower than its clean
runs say. A session sees few of those runs, often none (6% of 40 blocks: none in 8% of
sessions), and a t interval of the clean blocks, or of all of them, cannot see what it
did not sample: at the band's edge either PASSes far more often than its alpha.

So a PASS must also hold with the band's edge moved in by the allowance
``p_upper * s``: ``p_upper`` the one-sided Clopper-Pearson upper bound (at
ALLOWANCE_CONFIDENCE) of the candidate's disturbed share over the blocks it ran (set-aside
ones included), ``s`` the slowdown its disturbed runs showed against its clean ones (on
the log scale, in the direction that hurts the check), or DEFAULT_SLOWDOWN_PCT when it
showed none. A session that sees no disturbance still pays ``p_upper(0, n) * s``, which
shrinks as 1/n: a few more blocks buy it back. Where disturbance is not judged
($VGPU_IGNORE_DISTURBANCE) nothing is marked and no allowance is made."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from vgpu.results.store.disturbance import ignored
from vgpu.results.store.series import SeriesData
from vgpu.results.verdict.capacity_checks import CAPACITY_CHECK, GATE_UNIT, searches
from vgpu.results.verdict.capacity_system import SYSTEM_LABEL, knee
from vgpu.results.verdict.compare import Band, Check, log_band, pass_p_value, pct_of_log

# The upper bound of the disturbed share at this one-sided confidence: measured to keep a
# false PASS at the margin within 2.5% with 6% of the candidate's runs 10% slower
# (benchmarks/verdict_power.py), while an A/A still PASSes within 40 blocks.
ALLOWANCE_CONFIDENCE = 0.70
# A disturbed run's slowdown when the session saw none: what a steal or throttle period
# that is marked typically costs (the disturbance limits mark 5% steal; throttled clocks
# cost more): an assumption, stated where the allowance is reported.
DEFAULT_SLOWDOWN_PCT = 10.0


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if k >= n else 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    return min(1.0, sum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1)
                                 - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q)
                        for i in range(k + 1)))


@lru_cache(maxsize=4096)
def share_upper_bound(disturbed: int, blocks: int,
                      confidence: float = ALLOWANCE_CONFIDENCE) -> float:
    """One-sided Clopper-Pearson upper bound of a share seen ``disturbed`` times in
    ``blocks``: the p at which seeing that few or fewer has probability 1 - confidence."""
    if blocks <= 0:
        return 1.0
    if disturbed >= blocks:
        return 1.0
    tail = 1.0 - confidence
    if disturbed == 0:
        return 1.0 - tail ** (1.0 / blocks)
    low, high = disturbed / blocks, 1.0
    for _ in range(60):  # the CDF falls with p
        middle = (low + high) / 2.0
        if _binomial_cdf(disturbed, blocks, middle) > tail:
            low = middle
        else:
            high = middle
    return high


def slowdown_seen(clean: Sequence[float], disturbed: Sequence[float],
                  band: Band) -> float | None:
    """How much worse (log percent, >= 0) the disturbed runs' values are than the clean
    ones' for a check with ``band``: lower for a lower edge (throughput), higher for an
    upper edge (latency); None when either side has no positive value."""
    clean = [v for v in clean if v > 0]
    disturbed = [v for v in disturbed if v > 0]
    if not clean or not disturbed:
        return None
    shift = 100.0 * (sum(map(math.log, disturbed)) / len(disturbed)
                     - sum(map(math.log, clean)) / len(clean))
    worse = [-shift if band.lower_pct is not None else 0.0,
             shift if band.upper_pct is not None else 0.0]
    return max(0.0, *worse)


def allowance(disturbed: int, blocks: int, slowdown: float | None,
              confidence: float = ALLOWANCE_CONFIDENCE) -> float:
    """The allowance (log percent): the disturbed share's upper bound times the slowdown
    seen (log percent), DEFAULT_SLOWDOWN_PCT's when none was seen."""
    if slowdown is None or disturbed == 0:
        slowdown = -100.0 * math.log1p(-DEFAULT_SLOWDOWN_PCT / 100.0)
    return share_upper_bound(disturbed, blocks, confidence) * slowdown


def narrowed(band: Band, allowance_log_pct: float) -> Band:
    """``band`` with each finite edge moved in by ``allowance_log_pct`` (log scale)."""
    edges = log_band(band)
    return Band(
        lower_pct=None if edges.lower_pct is None
        else pct_of_log(edges.lower_pct + allowance_log_pct),
        upper_pct=None if edges.upper_pct is None
        else pct_of_log(edges.upper_pct - allowance_log_pct))


def holds_with(check: Check, allowance_log_pct: float, level: float) -> bool:
    """Whether ``check``'s PASS holds at the one-sided ``level`` against its band
    narrowed by the allowance (a check without statistics: its own verdict)."""
    if check.se_pct is None or check.df is None:
        return check.verdict == "PASS"
    band = narrowed(check.band, allowance_log_pct)
    if band.lower_pct is not None and band.upper_pct is not None and \
            band.lower_pct >= band.upper_pct:
        return False
    p = pass_p_value(replace(check, band=band))
    return p is not None and p <= level


def check_shortfall(check: Check, disturbed: int, blocks: int, slowdown: float | None,
                    confidence: float = ALLOWANCE_CONFIDENCE) -> str | None:
    """Why ``check``'s PASS does not hold with the allowance for ``disturbed`` of the
    candidate's ``blocks`` (``slowdown``: what its disturbed runs showed, log percent;
    None: none seen), at the check's own level; None when it holds or is no PASS. The
    capacity's VALID gate is left to the capacity ratio beside it, which carries the
    allowance: its statistic is a z value of an INVALID count, which a log-percent
    allowance cannot move."""
    if check.verdict != "PASS" or check.se_pct is None or check.unit == GATE_UNIT:
        return None
    allowed = allowance(disturbed, blocks, slowdown, confidence)
    if holds_with(check, allowed, check.level()):
        return None
    seen = "assumed" if not disturbed or slowdown is None else "seen"
    return (f"{check.metric}: allowance {allowed:.2f}% (slowdown "
            f"{allowed / share_upper_bound(disturbed, blocks, confidence):.1f}% {seen}), band "
            f"{narrowed(check.band, allowed).describe()}")


def capacity_compared(found: Sequence[Mapping[str, Any]], names: Sequence[str],
                      metric: str) -> float | None:
    """The capacity the capacity check ``metric`` compares in one run whose instances
    ``names`` searched ``found``: the named instance's knee (``capacity_at_slo NAME``, or
    the only instance's), the sum of the instances' knees for the system's check; None
    where that instance is not among them."""
    which = metric.removeprefix(CAPACITY_CHECK).strip()
    if which and which != SYSTEM_LABEL:
        if which not in names:
            return None
        found = [found[list(names).index(which)]]
    return sum(knee(search) for search in found)


def _capacities(data: SeriesData, metric: str) -> list[float] | None:
    """Per valid run of ``data``, the capacity ``metric`` compares (capacity_compared);
    None where a run has no search or no capacity."""
    per_run = searches(data)
    if len(per_run) != data.valid_count:
        return None
    values = []
    for run_id, found in zip(data.valid_run_ids, per_run, strict=True):
        capacity = capacity_compared(
            found, [inst.result.name for inst in data.instances[run_id]], metric)
        if capacity is None or capacity <= 0:
            return None
        values.append(capacity)
    return values


def _values(data: SeriesData, metric: str) -> list[float] | None:
    """A metric's values per valid run of ``data`` (in ``valid_run_ids`` order); for a
    capacity check the capacity of each run's searches, so that a disturbed block's
    slowdown is measured, not assumed."""
    if metric in data.samples:
        return data.samples[metric].values
    if metric.split(" ")[0] == CAPACITY_CHECK:
        return _capacities(data, metric)
    instance = metric.removeprefix("throughput ")
    values = data.per_instance_throughput.get(instance)
    return values if values is not None and len(values) == data.valid_count else None


def allowance_shortfall(candidate: SeriesData, reference: SeriesData,
                        checks: Sequence[Check]) -> list[str]:
    """Why an interleaved comparison's PASS does not hold with the allowance for the
    candidate's disturbed runs (none while disturbance is not judged), each check at its
    own level (its look's, for a series that ran the sequential design). The blocks set
    aside for a disturbance on one side count here, as a share and a slowdown; the
    counts per side are said."""
    if ignored():
        return []
    whole = candidate.with_set_aside or candidate
    counted = set(candidate.run_ids)
    marked = {d.run_id for d in whole.disturbed_runs if d.run_id not in counted}
    blocks = len(whole.runs)
    failing = []
    for check in checks:
        if check.verdict != "PASS" or check.se_pct is None or check.guard:
            continue
        values = _values(whole, check.metric)
        slowdown = None if values is None else slowdown_seen(
            [v for run_id, v in zip(whole.valid_run_ids, values, strict=True)
             if run_id not in marked],
            [v for run_id, v in zip(whole.valid_run_ids, values, strict=True)
             if run_id in marked], check.band)
        short = check_shortfall(check, len(marked), blocks, slowdown)
        if short is not None:
            failing.append(short)
    if not failing:
        return []
    per_side = ", ".join(f"{_set_aside_on(data)} on {data.label}"
                         for data in (candidate, reference))
    return [f"the PASS does not hold with an allowance for the candidate's disturbed "
            f"runs: {len(marked)} of {blocks} blocks set aside for a disturbance of "
            f"{candidate.label} (set aside for one side: {per_side}), a share of at most "
            f"{share_upper_bound(len(marked), blocks):.1%} "
            f"({ALLOWANCE_CONFIDENCE:.0%} upper bound) times the slowdown; "
            f"{'; '.join(failing)}; more blocks shrink the allowance"]


def _set_aside_on(data: SeriesData) -> int:
    """How many of ``data``'s runs were set aside disturbed on its side alone."""
    if data.with_set_aside is None:
        return 0
    counted = set(data.run_ids)
    return len({d.run_id for d in data.with_set_aside.disturbed_runs
                if d.run_id not in counted})
