"""Sequential repeats (pure): repeat a series (or the blocks of an interleaved design)
until its verdict is decided or a stated budget is spent, with error rates that hold.

Design: a group-sequential test with alpha spending (Lan and DeMets 1983; Jennison and
Turnbull 2000, ch. 7; vgpu.results.stats.spending), run twice, one-sided at 2.5% each: once for
FAIL (the difference is outside the band) and once for PASS (it is inside: the
intersection-union test over the checks, TOST with spending).

- The looks are fixed before any repeat runs, from the pilot's size and the budget
  alone (``schedule``): ``looks`` (7) totals at equal steps from the pilot to the cap
  (``max_repeats``, or what --budget affords after the pilot), rounded up to ``step``
  (2 for ABBA blocks: every look sees complete pairs). Nothing measured moves them, so a
  pilot whose variance happens to come out small cannot make itself the last look; the
  pilot is a look of its own with a small share of the alpha.
- Look k spends ``alpha(t_k)`` of the one-sided alpha (Hwang-Shih-DeCani, gamma -2),
  t_k its share of the planned total; its z boundary is applied to the t statistic (its
  own degrees of freedom: n - 2 for a crossover) as a nominal one-sided level ``p_k``.
  A check whose statistic is a one-sample t of its repeats (``one_sample_t``: a capacity
  ratio, 3 to 11 df) takes the boundary of the t process itself
  (vgpu.results.stats.spending.t_process_levels): at so few df the nominal levels let 2.9%
  cross for a 2.5% alpha.
- At every look, a FAIL needs Holm's step-down over the checks' one-sided FAIL p-values,
  the j-th step at the boundary recomputed for alpha / (m - j + 1) (not ``p_k`` divided);
  a PASS needs every check's PASS p-value at or below ``p_k`` and no shortfall (too few
  VALID repeats, INVALID runs split unevenly, a PASS that does not hold with set-aside
  blocks); a carry-over the crossover cannot separate stops a decision INCONCLUSIVE.
- A look cut short by the budget is final: it spends what is left of the alpha.
- The last look that does not decide says INCONCLUSIVE, why, and what would decide it.
- The variance still says what to expect (``plan_total``: the blocks at which an A/A
  PASSes with power 0.8 at the 80% upper bound of the pilot's variance), in the notes.

Assumptions: repeat (block) means are normal and independent. The stored verdict of a
series that ran this design is judged at its last look's level, with the repeated
confidence interval of that level (compare.at_look), so it says what the design said."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from vgpu.results.stats.intervals import (
    POWER,
    t_quantile,
    variance_upper_bound,
)
from vgpu.results.stats.noise import series_per_side
from vgpu.results.stats.spending import Spending, look_level
from vgpu.results.stats.spending import boundaries as boundaries  # re-exported
from vgpu.results.stats.spending import nominal_levels as nominal_levels
from vgpu.results.stats.spending import spent as spent
from vgpu.results.verdict.compare import (
    ALPHA,
    Band,
    Check,
    Verdict,
    advice,
    compare_samples,
    fail_p_value,
    holm_kept,
    log_band,
    pass_p_value,
    pct_of_log,
)

DEFAULT_MAX_REPEATS = 20
# Interleaved blocks: their noise is the machine's from one run to the next, so the
# budget buys short blocks, many of them (docs/results.md, real runs).
DEFAULT_MAX_BLOCKS = 40
DEFAULT_LOOKS = 7
DEFAULT_SPENDING: Spending = "hsd"
ONE_SIDED_ALPHA = ALPHA / 2  # per direction: false FAIL, false PASS
PLAN_CONFIDENCE = 0.80  # the schedule plans with this upper bound of the pilot's variance


@dataclass(frozen=True)
class Design:
    """How far and how often a series may be extended. ``schedule``: the look totals,
    fixed at the first look (empty before it)."""

    min_repeats: int = 3
    max_repeats: int = DEFAULT_MAX_REPEATS
    looks: int = DEFAULT_LOOKS
    power: float = POWER
    alpha: float = ONE_SIDED_ALPHA
    step: int = 1
    schedule: tuple[int, ...] = ()
    spending: Spending = DEFAULT_SPENDING
    # the comparisons the command judges as one family (vgpu.results.verdict.compare.one_family):
    # a FAIL stops the series only at its share alpha / family, as the command will judge it
    family: int = 1


@dataclass(frozen=True)
class Look:
    """One look at a series: its verdict at the look's level, whether the series stops
    here, the total repeats it should reach otherwise, and the schedule it follows."""

    n: int
    index: int  # 1 for the pilot
    final: bool
    verdict: Verdict
    stop: bool
    next_total: int
    mdd_pct: float | None
    why: str | None = None  # why it stops undecided, and what would decide
    schedule: tuple[int, ...] = ()
    level: float | None = None  # the look's nominal one-sided level
    needed: int | None = None  # the first look's uncapped plan, when the cap cuts it
    expected: int | None = None  # the blocks an A/A needs at the pilot's noise (plan_total)

    def describe(self) -> str:
        planned = "" if not self.schedule else \
            f" (looks at {', '.join(map(str, self.schedule))})"
        if self.needed is not None and self.schedule:
            planned += (f"; at this noise a PASS of no difference needs about "
                        f"{self.needed}, the budget stops at {self.schedule[-1]}: expect "
                        "INCONCLUSIVE unless the difference is clear")
        if not self.stop:
            return (f"look {self.index} at {self.n}: undecided, next look at "
                    f"{self.next_total}{planned}")
        mdd = "" if self.mdd_pct is None else \
            f", minimum detectable difference {self.mdd_pct:.2f}%"
        why = "" if self.why is None else f" ({self.why})"
        return f"look {self.index} at {self.n}: {self.verdict}{mdd}{why}"


def schedule(first: int, total: int, design: Design) -> tuple[int, ...]:
    """Look totals from the pilot ``first`` to ``total`` in equal steps, each rounded up
    to a multiple of ``design.step``; at most ``design.looks`` looks."""
    step = max(1, design.step)

    def up(n: float) -> int:
        return int(math.ceil(n / step - 1e-9) * step)

    total = max(up(total), up(first))
    if total <= first or design.looks < 2:
        return (max(first, total),)
    looks = [up(first + (total - first) * k / (design.looks - 1))
             for k in range(design.looks)]
    return tuple(sorted(set(looks)))


def _factor(design: Design, df: float) -> float:
    return _t(1.0 - design.alpha, df) + _t(design.power, df)


@lru_cache(maxsize=4096)
def _quantile(p: float, df_rounded: float) -> float:
    return t_quantile(p, df_rounded)


def _t(p: float, df: float) -> float:
    """t quantile; df rounded to 0.01 (and cached): lookups repeat across looks."""
    return _quantile(p, max(0.01, round(df, 2)))


def _edge_margin(check: Check) -> float:
    """The log-scale distance from 0 to the nearest band edge: what an A/A must clear."""
    band = log_band(check.band)
    edges = [abs(e) for e in (band.lower_pct, band.upper_pct) if e is not None]
    return min(edges, default=math.inf)


def repeats_cannot_decide(check: Check, design: Design) -> bool:
    """The part of the error more repeats cannot shrink (the series level, the reference's
    repeats) alone keeps a PASS of an A/A out of reach: add series, not repeats."""
    if check.se_pct is None or check.df is None or check.fixed_var <= 0:
        return False  # all of its error shrinks with repeats (a gate's at a 0 margin too)
    return _factor(design, check.fixed_df if math.isfinite(check.fixed_df) else 1e6) * \
        math.sqrt(check.fixed_var) >= _edge_margin(check)


NEED_LIMIT = 10_000  # repeats (blocks): beyond this, "needs more than 10000"


def plan_total(check: Check, design: Design, limit: int | None = None) -> int:
    """From the variance alone: the fewest repeats (blocks) at which a true difference of
    0 PASSes with ``design.power``: (t(1 - alpha) + t(power)) * se(n) <= the band's margin,
    se(n)^2 = shrinking * n_now / n + fixed, the shrinking part at the 80% upper bound of
    the pilot's variance (a pilot of few repeats underestimates it half the time);
    ``limit`` (default ``max_repeats``) when none up to it does."""
    n_now = max(check.units, 1)
    if check.se_pct is None or check.df is None:
        return design.max_repeats
    margin = _edge_margin(check)
    shrinking = variance_upper_bound(check.shrinking_var, check.df, PLAN_CONFIDENCE) \
        if check.shrinking_var > 0 else 0.0
    top = design.max_repeats if limit is None else limit

    def decides(n: int) -> bool:  # falls with n: se shrinks and df grows
        se = math.sqrt(shrinking * n_now / n + check.fixed_var)
        return _factor(design, check.df + (n - n_now)) * se <= margin

    low = max(n_now, 2)
    if low > top or not decides(top):
        return top
    while low < top:
        middle = (low + top) // 2
        if decides(middle):
            top = middle
        else:
            low = middle + 1
    return low


def check_ci(check: Check, alpha: float) -> tuple[float, float] | None:
    """``check``'s two-sided CI of the relative difference (percent) at 1 - alpha."""
    if check.se_pct is None or check.df is None:
        return None
    half = _t(1.0 - alpha / 2.0, check.df) * check.se_pct
    return pct_of_log(check.log_difference - half), pct_of_log(check.log_difference + half)


def look(checks: Sequence[Check], n: int, index: int, design: Design,
         blocked_pass: bool = False, disturbed: Sequence[str] = (),
         confounded: Sequence[str] = ()) -> Look:
    """Look ``index`` (1-based) at a series of ``n`` repeats (blocks) judged by ``checks``.
    The first look fixes the schedule from the checks' variance; each look stops on a
    FAIL (Holm at the look's level, within the series' share of the command's family)
    or an all-PASS (no ``blocked_pass``: too few VALID
    repeats), or at the last look; else it names the next look's total. A ``disturbed``
    comparison stops INCONCLUSIVE and says why; so does a ``confounded`` one (a
    carry-over found) at a look that would decide."""
    mdds = [c.mdd_pct for c in checks if c.mdd_pct is not None]
    mdd = max(mdds) if mdds else None
    if disturbed:  # no verdict can come of it, and more repeats do not undo it
        return Look(n, index, True, "INCONCLUSIVE", True, n, mdd, why=disturbed[0],
                    schedule=design.schedule)
    stats = [c for c in checks if c.se_pct is not None and c.df is not None]
    judged = [c for c in stats if not c.guard]  # a guard's PASS is no finding
    plan = design.schedule
    needed = expected = None
    if not plan:
        if any(repeats_cannot_decide(c, design) for c in judged):
            plan = (n,)  # more repeats cannot help: this look is the only one
        else:
            plan = schedule(n, design.max_repeats, design)
            expected = max((plan_total(c, design, NEED_LIMIT) for c in judged),
                           default=None)
            needed = expected if expected is not None and expected > plan[-1] else None
    position = next((k for k, total in enumerate(plan) if total >= n), len(plan) - 1)
    final = n >= plan[-1] or n >= design.max_repeats or position == len(plan) - 1

    def level_at(alpha: float, one_sample_t: bool = False) -> float:
        return look_level(plan, position, final, alpha, design.spending, one_sample_t)

    def own_level(check: Check) -> Callable[[float], float]:
        return lambda alpha: level_at(alpha, check.one_sample_t)

    level = level_at(design.alpha)
    fail_ps = [fail_p_value(c) for c in stats]
    kept = holm_kept([1.0 if p is None else p for p in fail_ps], design.alpha / design.family,
                     levels_at=[own_level(c) for c in stats]) if stats else set()
    passes = bool(judged) and all(
        p is not None and p <= level_at(design.alpha, c.one_sample_t)
        for p, c in zip([pass_p_value(c) for c in judged], judged, strict=True))
    gates_pass = all(c.verdict == "PASS" for c in checks if c not in stats)
    decides = bool(kept) or any(c.verdict == "FAIL" and c.se_pct is None for c in checks) \
        or (bool(stats) and gates_pass and not blocked_pass and passes)
    if decides and confounded:
        return Look(n, index, True, "INCONCLUSIVE", True, n, mdd, why=confounded[0],
                    schedule=plan, level=level, expected=expected)
    if any(c.verdict == "FAIL" and c.se_pct is None for c in checks) or kept:
        return Look(n, index, final, "FAIL", True, n, mdd, schedule=plan, level=level,
                    expected=expected)
    # A check without statistics (the accuracy gate) is decided as it stands: its PASS
    # holds at every look and must not keep the throughput's PASS from stopping the series.
    if stats and gates_pass and not blocked_pass and passes:
        return Look(n, index, final, "PASS", True, n, mdd, schedule=plan, level=level,
                    expected=expected)
    if final or not checks:
        stuck = [c for c in judged if repeats_cannot_decide(c, design)]
        undecided = next((c for c in judged if c.verdict != "PASS"), None)
        why = series_advice(stuck[0], design) if stuck else \
            None if undecided is None else advice(undecided)
        return Look(n, index, True, "INCONCLUSIVE", True, n, mdd, why=why, schedule=plan,
                    level=level, needed=needed, expected=expected)
    return Look(n, index, False, "INCONCLUSIVE", False, plan[position + 1]
                if plan[position] <= n else plan[position], mdd, schedule=plan, level=level,
                needed=needed, expected=expected)


def series_advice(check: Check, design: Design) -> str:
    """What a check whose series level dominates needs instead of repeats."""
    factor = _factor(design, 1e6)
    per_side = series_per_side(check.fixed_var, _edge_margin(check), factor)
    return (f"{check.metric}: more repeats cannot decide: the error that does not shrink "
            f"with repeats ({math.sqrt(check.fixed_var):.2f}%) needs about {per_side} "
            "series per side; `vgpu calibrate noise` measures this class's real series "
            "level in place of the default")


def plan_repeats(pilot_values: Sequence[float], reference_values: Sequence[float],
                 band: Band, power: float = POWER, cap: int = DEFAULT_MAX_REPEATS) -> int:
    """The total the schedule plans after ``pilot_values`` (from their variance only)."""
    check = compare_samples("plan", pilot_values, reference_values, band)
    return plan_total(check, Design(max_repeats=cap, power=power))


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
    step = max(1, design.step)
    extra -= extra % step
    return max(pilot.repeats, min(design.max_repeats, pilot.repeats + extra))


def expectation(pilot: Pilot, planned: int, affordable: int) -> str:
    """What the budget expects to decide: ``bert: ~6 repeats for a 2% verdict at CV 1.4%``."""
    cv = "unknown CV" if pilot.cv_pct is None else f"CV {pilot.cv_pct:.1f}%"
    text = f"{pilot.label}: ~{planned} repeats for a {pilot.tolerance_pct:g}% verdict at {cv}"
    if planned > affordable:
        text += f"; the budget affords {affordable}: expect INCONCLUSIVE unless it is clear"
    return text


def with_schedule(design: Design, step: Look) -> Design:
    """``design`` holding the schedule its first look fixed."""
    return replace(design, schedule=step.schedule) if step.schedule else design
