"""Sequential repeats (pure): repeat a series until its verdict is decided, with error
rates that hold, and a time budget spread over workloads by their noise.

Design (a group-sequential procedure with a Bonferroni split of alpha over the looks):

- the series is judged at most ``looks`` times: after the pilot (the scenario's minimum
  repeats), then at totals planned from the data seen so far, the last look at most at
  ``max_repeats``;
- the LAST look is the ordinary 95% verdict of compare.py (error rate <= 2.5% per side);
- an EARLIER look stops the series only when the CI at confidence
  ``1 - interim_alpha/(looks-1)`` decides (98.75% with the defaults); those looks share
  ``interim_alpha`` = 2.5%, i.e. 1.25% per side.

By the union bound a false FAIL (or a false PASS) happens with probability at most
2.5% + 1.25% = 3.75% per side, whatever the stopping; the margin to 5% absorbs Welch's
small-sample optimism (at 3 repeats its 95% CI misses up to ~3.7%, not 2.5%, per side). An
interim stop at the wider CI is also a 95% decision, so the stored series judged
afterwards says the same verdict.

Between looks the total is planned Stein-fashion from the noise measured so far: the
fewest repeats whose 95% CI half-width plus a power margin, ``(t(0.975) + t(power)) * se``,
is below the distance from the estimated difference to the nearest band edge (at least
``min_distance_pct``). Assumptions: repeat means are normal and independent, and the
reference series is fixed while the candidate grows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from vgpu.results.compare import (
    Band,
    Check,
    Verdict,
    _judge,
    compare_samples,
    pct_of_log,
    satterthwaite,
)
from vgpu.results.noise import series_per_side
from vgpu.results.stats import ALPHA, POWER, t_quantile

DEFAULT_MAX_REPEATS = 20
DEFAULT_LOOKS = 3


@dataclass(frozen=True)
class Design:
    """How far and how often a series may be extended."""

    min_repeats: int = 3
    max_repeats: int = DEFAULT_MAX_REPEATS
    looks: int = DEFAULT_LOOKS
    power: float = POWER
    min_distance_pct: float = 0.5  # plan for at least this distance from a band edge
    interim_alpha: float = ALPHA / 2  # two-sided, shared by the looks before the last

    def look_alpha(self, final: bool) -> float:
        """Two-sided alpha of a look: the last one is compare.py's 95% CI."""
        return ALPHA if final or self.looks < 2 else self.interim_alpha / (self.looks - 1)


@dataclass(frozen=True)
class Look:
    """One look at a series: its verdict at the look's confidence, whether the series
    stops here, and the total repeats it should reach otherwise."""

    n: int
    index: int  # 1 for the pilot
    final: bool
    verdict: Verdict
    stop: bool
    next_total: int
    mdd_pct: float | None
    why: str | None = None  # why it stops undecided before its last look

    def describe(self) -> str:
        if not self.stop:
            return (f"look {self.index} at {self.n} repeats: undecided, "
                    f"planned {self.next_total} repeats")
        mdd = "" if self.mdd_pct is None else f", minimum detectable difference {self.mdd_pct:.2f}%"
        why = "" if self.why is None else f" ({self.why})"
        return f"look {self.index} at {self.n} repeats: {self.verdict}{mdd}{why}"


@lru_cache(maxsize=4096)
def _quantile(p: float, df_rounded: float) -> float:
    return t_quantile(p, df_rounded)


def _t(p: float, df: float) -> float:
    """t quantile; df rounded to 0.01 (and cached): lookups repeat across looks."""
    return _quantile(p, max(0.01, round(df, 2)))


def check_ci(check: Check, alpha: float) -> tuple[float, float] | None:
    """``check``'s CI of the relative difference (percent) at confidence 1 - alpha."""
    if check.se_pct is None or check.df is None:
        return None
    half = _t(1.0 - alpha / 2.0, check.df) * check.se_pct
    return pct_of_log(check.log_difference - half), pct_of_log(check.log_difference + half)


def look_verdict(check: Check, alpha: float) -> Verdict:
    """The verdict of compare.py's rule on the CI at confidence 1 - alpha."""
    return _judge(check_ci(check, alpha), check.band)[0]


def edge_distance_pct(difference_pct: float, band: Band) -> float:
    """Distance from a difference to the nearest finite edge of ``band`` (inf: none)."""
    edges = [e for e in (band.lower_pct, band.upper_pct) if e is not None]
    return min((abs(difference_pct - e) for e in edges), default=math.inf)


def _distance(check: Check, design: Design) -> float:
    return max(edge_distance_pct(check.difference_pct, check.band), design.min_distance_pct)


def _factor(check: Check, design: Design) -> float:
    """The t-quantile sum at the df of the part repeats cannot shrink (what is left as
    the candidate's repeats grow)."""
    df = check.fixed_df if math.isfinite(check.fixed_df) else 1e6
    return _t(1.0 - ALPHA / 2.0, df) + _t(design.power, df)


def repeats_cannot_decide(check: Check, design: Design) -> bool:
    """The part of the error more repeats cannot shrink (the series level, the reference's
    repeats) alone keeps the decision out of reach: add series or blocks, not repeats."""
    if check.se_pct is None:
        return False
    return _factor(check, design) * math.sqrt(check.fixed_var) > _distance(check, design)


def plan_check(check: Check, design: Design) -> int:
    """Stein's second stage for one check: the fewest total candidate repeats (or blocks of
    an interleaved design; from the current count to ``max_repeats``) at which
    ``(t(0.975) + t(power)) * se`` is below the distance to the nearest band edge, the
    standard error's shrinking part scaled by n_now / n; the current count when more
    cannot reach it (``repeats_cannot_decide``), ``max_repeats`` when none does."""
    n_now = check.candidate.n
    if check.se_pct is None:
        return min(design.max_repeats, max(n_now + 1, design.min_repeats))
    if repeats_cannot_decide(check, design):
        return n_now
    distance = _distance(check, design)
    for n in range(max(n_now, 2), design.max_repeats + 1):
        shrinking = check.shrinking_var * n_now / n
        df = satterthwaite([(shrinking, n - 1.0), (check.fixed_var, check.fixed_df)])
        df = df if math.isfinite(df) else 1e6
        factor = _t(1.0 - ALPHA / 2.0, df) + _t(design.power, df)
        if factor * math.sqrt(shrinking + check.fixed_var) <= distance:
            return n
    return design.max_repeats


def plan_repeats(
    pilot_values: Sequence[float], reference_values: Sequence[float], band: Band,
    alpha: float = ALPHA, power: float = POWER, cap: int = DEFAULT_MAX_REPEATS,
) -> int:
    """Total candidate repeats Stein's rule asks for after ``pilot_values`` (``alpha``
    is that of the final 95% look: only ALPHA is supported, it is compare.py's)."""
    if alpha != ALPHA:
        raise ValueError(f"the final look is compare.py's {1 - ALPHA:.0%} CI, got alpha {alpha}")
    check = compare_samples("plan", pilot_values, reference_values, band)
    return plan_check(check, Design(max_repeats=cap, power=power))


def look(checks: Sequence[Check], n: int, index: int, design: Design,
         blocked_pass: bool = False) -> Look:
    """Look ``index`` (1-based) at a series of ``n`` repeats judged by ``checks``: stop on
    a FAIL or an all-PASS at this look's confidence, or at the last look; else plan the
    next total (at least one more repeat). ``blocked_pass``: too few VALID repeats for a
    PASS (compare.py's shortfalls)."""
    final = index >= design.looks or n >= design.max_repeats
    alpha = design.look_alpha(final)
    verdicts = [look_verdict(c, alpha) for c in checks]
    mdds = [c.mdd_pct for c in checks if c.mdd_pct is not None]
    mdd = max(mdds) if mdds else None
    if "FAIL" in verdicts:
        return Look(n, index, final, "FAIL", True, n, mdd)
    if verdicts and all(v == "PASS" for v in verdicts) and not blocked_pass:
        return Look(n, index, final, "PASS", True, n, mdd)
    if final or not checks:
        return Look(n, index, final, "INCONCLUSIVE", True, n, mdd)
    undecided = [c for c, v in zip(checks, verdicts, strict=True) if v != "PASS"] or checks
    stuck = [c for c in undecided if repeats_cannot_decide(c, design)]
    if stuck:
        return Look(n, index, final, "INCONCLUSIVE", True, n, mdd,
                    why=series_advice(stuck[0], design))
    planned = max(plan_check(c, design) for c in undecided)
    return Look(n, index, final, "INCONCLUSIVE", False,
                min(design.max_repeats, max(planned, n + 1)), mdd)


def series_advice(check: Check, design: Design) -> str:
    """What a check whose series level dominates needs instead of repeats."""
    distance = _distance(check, design)
    per_side = series_per_side(check.fixed_var, distance, _factor(check, design))
    return (f"{check.metric}: more repeats cannot decide: the error that does not shrink "
            f"with repeats (noise between series and the reference's own repeats, "
            f"{math.sqrt(check.fixed_var):.2f}%) needs about {per_side} series per side for "
            f"a {distance:.1f}% margin; `vgpu calibrate noise` measures this class's real "
            "series level in place of the default")


def decide(candidate: Sequence[float], reference: Sequence[float], band: Band,
           index: int, design: Design = Design()) -> Look:
    """One look at a single metric: candidate repeats against reference repeats."""
    return look([compare_samples("metric", candidate, reference, band)], len(candidate),
                index, design)


@dataclass(frozen=True)
class Pilot:
    """A workload after its pilot repeats, as a time budget sees it."""

    label: str
    repeats: int
    repeat_s: float  # mean wall time of one repeat
    cv_pct: float | None  # headline stdev / mean over the pilot
    tolerance_pct: float


def budget_total(pilot: Pilot, remaining_s: float, workloads_after: int,
                 design: Design) -> int:
    """The most repeats ``pilot``'s workload may reach in the ``remaining_s`` seconds of
    the budget: later workloads keep the time of their own pilots (estimated with this
    workload's repeat time), then an equal share of the rest each; a workload that
    decides sooner leaves its unused share to the next ones."""
    reserve = workloads_after * pilot.repeats * pilot.repeat_s
    share = max(0.0, remaining_s - reserve) / (workloads_after + 1)
    extra = int(share // pilot.repeat_s) if pilot.repeat_s > 0 else 0
    return max(pilot.repeats, min(design.max_repeats, pilot.repeats + extra))


def expectation(pilot: Pilot, planned: int, affordable: int) -> str:
    """What the budget expects to decide: ``bert: ~6 repeats for a 2% verdict at CV 1.4%``."""
    cv = "unknown CV" if pilot.cv_pct is None else f"CV {pilot.cv_pct:.1f}%"
    text = f"{pilot.label}: ~{planned} repeats for a {pilot.tolerance_pct:g}% verdict at {cv}"
    if planned > affordable:
        text += f"; the budget affords {affordable}: expect INCONCLUSIVE unless it is clear"
    return text
