"""Comparisons and verdicts (pure). A check compares one metric of a candidate with a
reference and asks whether the 95% confidence interval of the relative difference lies
inside the allowed band:

- PASS: the whole interval is inside the band;
- FAIL: the whole interval is outside it;
- INCONCLUSIVE: the interval straddles a band edge (the noise is larger than what the
  tolerance allows to judge), or a side has fewer than 2 repeats (no noise estimate).

A comparison whose series have fewer VALID repeats than they ask for (``shortfalls``) is
INCONCLUSIVE where its checks would PASS; a FAIL found in the valid repeats stays FAIL. A
comparison with a run that other load disturbed (``disturbed``) is INCONCLUSIVE whatever
its checks say.

Intervals are built on the log-ratio scale, ``100 * ln(candidate / reference)`` ("log
percent"), and shown as percent, ``100 * (exp(x / 100) - 1)``: a bound never lies below
-100%, and the reference's own uncertainty is in the interval (the delta method on the
ratio of means), not divided out as if exact. The interval depends on the design
(``Check.design``):

- ``interleaved``: both sides ran in alternating blocks in one session (ABBA); the
  per-block log ratios are analysed as a two-period crossover: with 4 blocks or more and
  both orders present, the estimate is the mean of the two order groups' means and the
  error the pooled within-group spread (n - 2 df), so a constant period effect (the
  second run of a block warmer or later than the first) falls out instead of widening the
  interval; with fewer blocks, the paired t interval (n - 1 df);
- ``separate series``: the two series ran at different times; the squared standard error
  is cv_c^2/n_c + cv_r^2/n_r + 2 * series CV^2 (relative, log percent), the series level
  from the class's noise calibration (vgpu.results.stats.noise, its upper confidence bound) or
  its stated default, with Welch-Satterthwaite degrees of freedom;
- ``reference value``: a one-sample t interval of the candidate around the value.

An INCONCLUSIVE check says what would decide it (``advice``): how many blocks or repeats
in all at the noise measured, or how many series per side, or `vgpu calibrate noise`.

Several checks in one comparison are one family: a FAIL stands only when Holm's
step-down procedure over the checks' one-sided p-values keeps it at 2.5% (``holm``);
PASS needs every check inside its band, which needs no correction (intersection-union).
A command that judges several workloads makes them one family (``one_family``): each
workload's comparison gets an equal share of the 2.5% and Holm runs within it, so a
series' looks, which know how many workloads the command judges but not what the later
ones will measure, stop on a FAIL only where the command's verdict keeps it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from vgpu.results.stats.intervals import (
    ALPHA,
    POWER,
    Summary,
    summarize,
    t_cdf,
    t_quantile,
)
from vgpu.results.stats.noise import NoiseLevels, series_per_side
from vgpu.results.stats.spending import Spending, look_level

Verdict = Literal["PASS", "FAIL", "INCONCLUSIVE"]
ComparisonKind = Literal["vm-vs-bare-metal", "scenario-vs-scenario", "run-vs-baseline"]
Design = Literal["interleaved", "separate series", "reference value"]
DEFAULT_TOLERANCE = 0.02


@dataclass(frozen=True)
class Band:
    """Allowed relative difference, in percent; None means unbounded on that side."""

    lower_pct: float | None = None
    upper_pct: float | None = None

    def describe(self) -> str:
        if self.lower_pct is not None and self.upper_pct is not None:
            return f"between {self.lower_pct:+.2f}% and {self.upper_pct:+.2f}%"
        if self.lower_pct is not None:
            return f">= {self.lower_pct:+.2f}%"
        if self.upper_pct is not None:
            return f"<= {self.upper_pct:+.2f}%"
        return "any"


def band_for(higher_is_better: bool, tolerance: float) -> Band:
    """Throughput may not drop more than ``tolerance``; latency may not rise more."""
    pct = tolerance * 100.0
    return Band(lower_pct=-pct) if higher_is_better else Band(upper_pct=pct)


def log_pct(pct: float) -> float:
    """A relative difference in percent on the log-ratio scale (log percent)."""
    return 100.0 * math.log1p(pct / 100.0)


def pct_of_log(log_percent: float) -> float:
    """Log percent back to a relative difference in percent (> -100%)."""
    return 100.0 * math.expm1(log_percent / 100.0) if log_percent < 70000.0 else math.inf


def log_ratio(metric: str, candidate: float, reference: float) -> float:
    """100 * ln(candidate / reference); ValueError when either is not positive."""
    if reference == 0:
        raise ValueError(f"{metric}: the reference mean is zero, no relative difference")
    if candidate <= 0 or reference <= 0:
        raise ValueError(f"{metric}: a ratio needs positive values, got {candidate:g} "
                         f"against {reference:g}")
    return 100.0 * math.log(candidate / reference)


@dataclass(frozen=True)
class Reference:
    """A performance reference as data (like ReFrame): the expected value and the
    allowed relative deviation below (``lower``, e.g. -0.02) and above (``upper``)."""

    value: float
    lower: float | None = None
    upper: float | None = None
    unit: str = ""

    @property
    def band(self) -> Band:
        return Band(
            lower_pct=None if self.lower is None else self.lower * 100.0,
            upper_pct=None if self.upper is None else self.upper * 100.0,
        )


@dataclass(frozen=True)
class Check:
    """One metric judged: candidate against a reference sample or a reference value."""

    metric: str
    unit: str
    candidate: Summary
    reference_mean: float
    reference: Summary | None
    difference_pct: float
    ci_pct: tuple[float, float] | None
    mdd_pct: float | None
    band: Band
    verdict: Verdict
    reason: str
    design: Design = "separate series"
    se_pct: float | None = None
    df: float | None = None
    # se_pct^2 split into the part that shrinks as 1/n with the candidate's repeats (or
    # the blocks of an interleaved design) and the part more repeats cannot shrink (the
    # reference's repeats, the series level): what a sequential plan needs
    shrinking_var: float = 0.0
    fixed_var: float = 0.0
    fixed_df: float = math.inf
    noise: str | None = None  # what the series level rests on (NoiseLevels.describe)
    # the estimate on the log-ratio scale (log percent): se_pct, shrinking_var and
    # fixed_var are on this scale too
    log_difference: float = 0.0
    # how many repeats (blocks) each side has; for the interleaved design, the blocks
    units: int = 0
    # the group-sequential design the series ran (vgpu.results.verdict.sequential): its look
    # totals and which of them this is; none: a fixed sample, judged at 95%
    looks: tuple[int, ...] = ()
    look: int = -1
    spending: Spending = "hsd"
    # the look a budget that ran out made the last one: it spends what is left of the alpha
    last_look: bool = False
    # its statistic is a one-sample t of its units on units - 1 df (a capacity ratio's
    # repeats): a look judges it at the t process's boundary
    # (vgpu.results.stats.spending.t_process_levels), not at the normal one's nominal level
    one_sample_t: bool = False
    # why the check's own rule keeps it from a FAIL (or a PASS) whatever its statistic
    # says (a pooled tail whose repeats disagree, a capacity ratio of too few repeats):
    # its p-value for that side is 1, so the looks, Holm and the stored verdict agree
    fail_blocked: str | None = None
    pass_blocked: str | None = None
    # a guard can FAIL a comparison but its PASS is no finding: it shows that no
    # regression was found where equivalence cannot be shown (the latency of instances
    # that share their compute: their neighbours' load sets it), so a PASS needs none
    guard: bool = False
    # the part of the interval's half-width (log percent) a capacity search's brackets
    # make: more runs per search shrink it, more repeats do not
    bracket_pct: float = 0.0

    def level(self, alpha: float = ALPHA / 2) -> float:
        """The one-sided level this check is judged at for a family share ``alpha``: the
        design's boundary at this look, recomputed for ``alpha`` (else ``alpha``)."""
        if not self.looks:
            return alpha
        return look_level(self.looks, self.look,
                          self.last_look or self.look == len(self.looks) - 1, alpha,
                          self.spending, self.one_sample_t)

    @property
    def ratio(self) -> float:
        return 1.0 + self.difference_pct / 100.0

    def log_ci(self, alpha: float = ALPHA) -> tuple[float, float] | None:
        """The two-sided 1 - alpha interval on the log scale."""
        if self.se_pct is None or self.df is None:
            return None
        half = t_quantile(1.0 - alpha / 2.0, self.df) * self.se_pct
        return self.log_difference - half, self.log_difference + half


def _judge(ci: tuple[float, float] | None, band: Band,
           confidence: str = "95%") -> tuple[Verdict, str]:
    """compare.py's rule on an interval in percent (or, the band converted, log percent:
    the rule is the same on any monotone scale)."""
    if ci is None:
        return "INCONCLUSIVE", "fewer than 2 repeats: the noise cannot be estimated"
    low, high = ci
    below = band.lower_pct is not None and high < band.lower_pct
    above = band.upper_pct is not None and low > band.upper_pct
    if below or above:
        return "FAIL", f"{confidence} CI [{low:+.2f}%, {high:+.2f}%] is outside {band.describe()}"
    inside_low = band.lower_pct is None or low >= band.lower_pct
    inside_high = band.upper_pct is None or high <= band.upper_pct
    if inside_low and inside_high:
        return "PASS", f"{confidence} CI [{low:+.2f}%, {high:+.2f}%] is within {band.describe()}"
    return (
        "INCONCLUSIVE",
        f"{confidence} CI [{low:+.2f}%, {high:+.2f}%] straddles the limit "
        f"({band.describe()}): the noise is larger than the tolerance allows to judge",
    )


def log_band(band: Band) -> Band:
    """``band`` with its edges on the log-ratio scale."""
    return Band(lower_pct=None if band.lower_pct is None else log_pct(band.lower_pct),
                upper_pct=None if band.upper_pct is None else log_pct(band.upper_pct))


def edge_distance(check: Check) -> float:
    """Log-scale distance from the estimate to the nearest finite band edge (inf: none)."""
    edges = [e for e in (log_band(check.band).lower_pct, log_band(check.band).upper_pct)
             if e is not None]
    return min((abs(check.log_difference - e) for e in edges), default=math.inf)


def advice(check: Check, margin_pct: float = 0.5) -> str:
    """What would decide an undecided check at the noise it measured: a power-0.8 design
    needs (t(0.975) + t(0.8)) standard errors between the estimate and the nearest band
    edge (at least ``margin_pct``)."""
    if check.se_pct is None or check.df is None:
        return "add repeats: at least 2 per side (blocks) are needed to estimate the noise"
    distance = max(edge_distance(check), margin_pct)
    factor = mdd_factor(max(check.df, 1.0))
    fixed_sd = math.sqrt(check.fixed_var)
    if factor * fixed_sd >= distance:
        per_side = series_per_side(check.fixed_var, distance, factor)
        calibrate = ("; `vgpu calibrate noise` measures this class's noise between series "
                     "in place of the default" if check.noise and "not calibrated"
                     in check.noise else "")
        return (f"more repeats cannot decide: the error repeats do not shrink (noise "
                f"between series, the reference's repeats) is {fixed_sd:.2f}%: about "
                f"{per_side} series per side, or an interleaved run (vgpu bench with "
                f"--with-baseline), would decide a {distance:.1f}% margin{calibrate}")
    shrinking = check.shrinking_var * max(check.units, 1)
    needed = math.ceil(shrinking / ((distance / factor) ** 2 - check.fixed_var))
    needed = max(needed, check.units + 1)
    unit = "blocks" if check.design == "interleaved" else "repeats"
    return (f"about {needed} {unit} in all ({needed - check.units} more) would decide at "
            f"this noise (estimate {check.difference_pct:+.2f}%, {distance:.1f}% from "
            "the limit)")


def mdd_factor(df: float) -> float:
    """t(1 - alpha/2) + t(power): a true difference this many standard errors from zero
    is detected with the wanted power."""
    return t_quantile(1 - ALPHA / 2, df) + t_quantile(POWER, df)


def _check(metric: str, unit: str, cand: Summary, ref_mean: float, ref: Summary | None,
           log_difference: float, variance: tuple[float, float], df: float | None,
           band: Band, design: Design, noise: str | None = None,
           fixed_df: float = math.inf, units: int = 0) -> Check:
    """A check from a log-ratio estimate (log percent) and its variance split (shrinking,
    fixed; log percent squared): interval, MDD and verdict at 95%, shown in percent."""
    shrinking, fixed = variance
    ci = se_pct = mdd_pct = None
    if df is not None:
        se_pct = math.sqrt(shrinking + fixed)
        half = t_quantile(1 - ALPHA / 2, df) * se_pct
        ci = (pct_of_log(log_difference - half), pct_of_log(log_difference + half))
        mdd_pct = pct_of_log(mdd_factor(df) * se_pct)
    verdict, reason = _judge(ci, band)
    check = Check(metric=metric, unit=unit, candidate=cand, reference_mean=ref_mean,
                  reference=ref, difference_pct=pct_of_log(log_difference), ci_pct=ci,
                  mdd_pct=mdd_pct, band=band, verdict=verdict, reason=reason,
                  design=design, se_pct=se_pct, df=df, shrinking_var=shrinking,
                  fixed_var=fixed, fixed_df=fixed_df, noise=noise,
                  log_difference=log_difference, units=units)
    if verdict == "INCONCLUSIVE" and ci is not None:
        check = replace(check, reason=f"{reason}; {advice(check)}")
    return check


def at_look(check: Check, looks: Sequence[int], total: int,
            spending: Spending = "hsd", ended_at: int | None = None) -> Check:
    """``check`` as the group-sequential design with look totals ``looks`` judges it at
    its look at ``total`` (the first look at or past it; ``ended_at``: the look a budget
    that ran out made the last): its interval the repeated confidence interval of that
    look's level (Jennison and Turnbull ch. 9), its verdict that interval's, so that the
    stored verdict says what the design said."""
    position = next((k for k, n in enumerate(looks) if n >= total), len(looks) - 1)
    judged = replace(check, looks=tuple(looks), look=position, spending=spending,
                     last_look=ended_at == looks[position] and position < len(looks) - 1)
    if check.se_pct is None or check.df is None or check.ci_pct is None:
        return judged
    level = judged.level()
    half = t_quantile(1.0 - level, check.df) * check.se_pct
    ci = (pct_of_log(check.log_difference - half), pct_of_log(check.log_difference + half))
    confidence = (f"{100 * (1 - 2 * level):.2f}% repeated (look {position + 1} of "
                  f"{len(looks)} at {looks[position]}"
                  f"{', the last: the budget ran out' if judged.last_look else ''})")
    verdict, reason = _judge(ci, check.band, confidence)
    if check.guard and (verdict != "FAIL" or check.fail_blocked is not None):
        said = check.reason if check.verdict == "PASS" else \
            f"{reason}; a guard, not a FAIL at this look: it decides nothing"
        return replace(judged, ci_pct=ci, verdict="PASS", reason=said)
    blocked = check.fail_blocked if verdict == "FAIL" else \
        check.pass_blocked if verdict == "PASS" else None
    if blocked is not None:
        verdict, reason = "INCONCLUSIVE", f"{reason}; not a {verdict}: {blocked}"
    judged = replace(judged, ci_pct=ci, verdict=verdict, reason=reason)
    if verdict == "INCONCLUSIVE":
        judged = replace(judged, reason=f"{reason}; {advice(judged)}")
    return judged


def compare_samples(
    metric: str,
    candidate: Sequence[float],
    reference: Sequence[float],
    band: Band,
    unit: str = "",
    levels: NoiseLevels | None = None,
) -> Check:
    """Two-sample check of two separate series: candidate repeats against reference
    repeats, the series level of ``levels`` added (None: repeats only, for series known
    to share their state)."""
    return compare_summaries(metric, summarize(candidate), summarize(reference), band, unit,
                             levels)


def satterthwaite(parts: Sequence[tuple[float, float]]) -> float:
    """Degrees of freedom of a sum of variance estimates, each given as (variance, df)."""
    total = math.fsum(v for v, _ in parts)
    denominator = math.fsum(v * v / df for v, df in parts if df > 0 and v > 0)
    return total * total / denominator if denominator > 0 else math.inf


def compare_summaries(metric: str, cand: Summary, ref: Summary, band: Band,
                      unit: str = "", levels: NoiseLevels | None = None) -> Check:
    """The two-sample check from the two sides' summaries (n, mean, stdev): what a
    reference calibrated from stored runs keeps. The relative variances are the delta
    method's for the log of each mean."""
    difference = log_ratio(metric, cand.mean, ref.mean)
    metric_levels = None if levels is None else levels.for_metric(metric)
    noise = None if metric_levels is None else metric_levels.describe()
    if cand.stdev is None or ref.stdev is None:
        return _check(metric, unit, cand, ref.mean, ref, difference, (0.0, 0.0), None, band,
                      "separate series", noise, units=cand.n)
    var_c = (100.0 * cand.stdev / cand.mean) ** 2 / cand.n
    var_r = (100.0 * ref.stdev / ref.mean) ** 2 / ref.n
    parts = [(var_c, cand.n - 1.0), (var_r, ref.n - 1.0)]
    var_s = 0.0
    if metric_levels is not None:
        var_s = 2.0 * (100.0 * metric_levels.judged_series_cv) ** 2
        parts.append((var_s, metric_levels.judged_series_df))
    df = satterthwaite(parts)
    if not math.isfinite(df):  # no spread anywhere: the smallest honest df
        df = float(cand.n + ref.n - 2)
    return _check(metric, unit, cand, ref.mean, ref, difference, (var_c, var_r + var_s), df,
                  band, "separate series", noise, satterthwaite(parts[1:]), units=cand.n)


def period_groups(blocks: Sequence[int]) -> list[int]:
    """The order group of each block of an ABBA design: 0 where the reference ran first
    (even blocks), 1 where the candidate did."""
    return [block % 2 for block in blocks]


def crossover(log_ratios: Sequence[float], groups: Sequence[int] | None,
              ) -> tuple[float, float, float] | None:
    """Estimate, variance of the estimate and df of per-block log ratios: the two-period
    crossover (mean of the order groups' means, pooled within-group variance, n - 2 df)
    with 4 blocks or more and both orders present, else the paired mean (n - 1 df);
    None below 2 blocks."""
    n = len(log_ratios)
    if n < 2:
        return None
    sides = [[d for d, g in zip(log_ratios, groups, strict=True) if g == k]
             for k in (0, 1)] if groups is not None else [list(log_ratios), []]
    if n >= 4 and all(sides):
        means = [math.fsum(side) / len(side) for side in sides]
        pooled = math.fsum((d - m) ** 2 for side, m in zip(sides, means, strict=True)
                           for d in side) / (n - 2)
        variance = pooled / 4.0 * (1.0 / len(sides[0]) + 1.0 / len(sides[1]))
        return (means[0] + means[1]) / 2.0, variance, float(n - 2)
    diffs = summarize(log_ratios)
    assert diffs.stdev is not None
    return diffs.mean, diffs.stdev**2 / n, float(n - 1)


def compare_paired(metric: str, candidate: Sequence[float], reference: Sequence[float],
                   band: Band, unit: str = "", blocks: Sequence[int] | None = None) -> Check:
    """Check of an interleaved design: ``candidate[i]`` and ``reference[i]`` ran in the same
    block (``blocks[i]``, its index in the session; default 0, 1, 2, ...): the crossover
    analysis of the per-block log ratios (``crossover``)."""
    if len(candidate) != len(reference):
        raise ValueError(f"{metric}: {len(candidate)} candidate and {len(reference)} "
                         "reference blocks do not pair")
    cand, ref = summarize(candidate), summarize(reference)
    ratios = [log_ratio(metric, c, r) for c, r in zip(candidate, reference, strict=True)]
    groups = period_groups(range(len(ratios)) if blocks is None else blocks)
    estimate = crossover(ratios, groups)
    if estimate is None:
        return _check(metric, unit, cand, ref.mean, ref, ratios[0] if ratios else 0.0,
                      (0.0, 0.0), None, band, "interleaved", units=len(ratios))
    mean, variance, df = estimate
    return _check(metric, unit, cand, ref.mean, ref, mean, (variance, 0.0), df, band,
                  "interleaved", units=len(ratios))


CARRY_OVER_ALPHA = 0.02  # two-sided: the check runs once, where a look would decide


@dataclass(frozen=True)
class CarryOver:
    """The carry-over check of an ABBA design: in blocks the reference begins, the
    candidate's run follows the reference; in blocks the candidate begins, the
    reference's run follows the candidate. A switching cost that differs between the
    sides shows as a difference between the two order groups' block totals (Grizzle's
    test; here with the session's drift fitted as a line in the block index), which the
    crossover's estimate cannot separate from the difference it estimates."""

    metric: str
    estimate: float  # candidate-first blocks' total less reference-first blocks', log %
    se: float
    df: float
    p_value: float  # two-sided

    @property
    def found(self) -> bool:
        return self.p_value <= CARRY_OVER_ALPHA

    def describe(self) -> str:
        return (f"{self.metric}: carry-over: the blocks the candidate began total "
                f"{self.estimate:+.2f}% against those the reference began (p = "
                f"{self.p_value:.3f}, two-sided): a switching cost that differs between "
                "the sides, which the ABBA blocks cannot separate from the difference "
                f"(it moves the estimate by about {abs(self.estimate) / 2:.2f}%); rerun "
                "with a washout run between the sides or longer runs")


def carry_over(metric: str, candidate: Sequence[float], reference: Sequence[float],
               blocks: Sequence[int]) -> CarryOver | None:
    """The carry-over check (``CarryOver``) of paired runs ``candidate[i]``,
    ``reference[i]`` of block ``blocks[i]``; None below 6 blocks or 2 of each order."""
    n = len(blocks)
    groups = period_groups(blocks)
    if n < 6 or min(groups.count(0), groups.count(1)) < 2:
        return None
    totals = [log_ratio(metric, c, 1.0) + log_ratio(metric, r, 1.0)
              for c, r in zip(candidate, reference, strict=True)]

    def residuals(values: Sequence[float]) -> list[float]:  # of a line in the block index
        mean_x, mean_y = math.fsum(blocks) / n, math.fsum(values) / n
        sxx = math.fsum((x - mean_x) ** 2 for x in blocks)
        slope = 0.0 if sxx == 0 else math.fsum(
            (x - mean_x) * (y - mean_y) for x, y in zip(blocks, values, strict=True)) / sxx
        return [y - mean_y - slope * (x - mean_x) for x, y in zip(blocks, values, strict=True)]

    ry, rg = residuals(totals), residuals([float(g) for g in groups])
    sgg = math.fsum(g * g for g in rg)
    if sgg <= 0:
        return None
    estimate = math.fsum(y * g for y, g in zip(ry, rg, strict=True)) / sgg
    df = float(n - 3)
    variance = max(0.0, math.fsum(y * y for y in ry) - estimate ** 2 * sgg) / df
    se = math.sqrt(variance / sgg)
    p = 0.0 if se == 0 else 2.0 * (1.0 - t_cdf(abs(estimate) / se, df))
    return CarryOver(metric, estimate, se, df, p)


def check_reference(metric: str, candidate: Sequence[float], reference: Reference,
                    levels: NoiseLevels | None = None) -> Check:
    """One-sample check of candidate repeats against a reference value and its band (and
    the candidate series' own series level, when ``levels`` is given)."""
    cand = summarize(candidate)
    difference = log_ratio(metric, cand.mean, reference.value)
    metric_levels = None if levels is None else levels.for_metric(metric)
    noise = None if metric_levels is None else metric_levels.describe()
    if cand.stdev is None:
        return _check(metric, reference.unit, cand, reference.value, None, difference,
                      (0.0, 0.0), None, reference.band, "reference value", units=cand.n)
    var_c = (100.0 * cand.stdev / cand.mean) ** 2 / cand.n
    parts = [(var_c, cand.n - 1.0)]
    var_s = 0.0
    if metric_levels is not None:
        var_s = (100.0 * metric_levels.judged_series_cv) ** 2
        parts.append((var_s, metric_levels.judged_series_df))
    df = satterthwaite(parts)
    if not math.isfinite(df):
        df = float(cand.n - 1)
    return _check(metric, reference.unit, cand, reference.value, None, difference,
                  (var_c, var_s), df, reference.band, "reference value", noise,
                  satterthwaite(parts[1:]), units=cand.n)


def fail_p_value(check: Check) -> float | None:
    """One-sided p-value of 'the true difference is inside the band' against a FAIL."""
    if check.se_pct is None or check.df is None:
        return None
    if check.fail_blocked is not None:
        return 1.0
    if check.se_pct == 0:
        return 0.0 if check.verdict == "FAIL" else 1.0
    band = log_band(check.band)
    ps = []
    if band.lower_pct is not None:
        ps.append(t_cdf((check.log_difference - band.lower_pct) / check.se_pct, check.df))
    if band.upper_pct is not None:
        ps.append(1.0 - t_cdf((check.log_difference - band.upper_pct) / check.se_pct,
                              check.df))
    return min(ps) if ps else None


def pass_p_value(check: Check) -> float | None:
    """One-sided p-value of 'the true difference is outside the band' against a PASS:
    the larger of the two edges' (an intersection-union test)."""
    if check.se_pct is None or check.df is None:
        return None
    if check.pass_blocked is not None:
        return 1.0
    if check.se_pct == 0:
        return 0.0 if check.verdict == "PASS" else 1.0
    band = log_band(check.band)
    ps = []
    if band.lower_pct is not None:
        ps.append(1.0 - t_cdf((check.log_difference - band.lower_pct) / check.se_pct,
                              check.df))
    if band.upper_pct is not None:
        ps.append(t_cdf((check.log_difference - band.upper_pct) / check.se_pct, check.df))
    return max(ps) if ps else None


def holm_kept(p_values: Sequence[float], alpha: float,
              level_at: Callable[[float], float] | None = None,
              levels_at: Sequence[Callable[[float], float]] | None = None) -> set[int]:
    """Indices Holm's step-down keeps at family level ``alpha`` (one-sided). The j-th
    step tests at level ``alpha / (m - j + 1)``, or, for a look of a group-sequential
    design, at ``level_at(alpha / (m - j + 1))``: the look's boundary recomputed for
    that share of the alpha; ``levels_at``: each p-value's own boundary (a one-sample
    t's differs from the normal one's)."""
    kept: set[int] = set()
    m = len(p_values)
    for rank, index in enumerate(sorted(range(m), key=p_values.__getitem__)):
        share = alpha / (m - rank)
        own = levels_at[index] if levels_at is not None else level_at
        if p_values[index] > (share if own is None else own(share)):
            break
        kept.add(index)
    return kept


def holm(checks: Sequence[Check], alpha: float = ALPHA / 2, family: int = 1) -> list[Check]:
    """The checks with Holm's step-down procedure over their FAILs: the j-th smallest
    FAIL p-value of the m statistical checks must be <= ``alpha`` / (m - j + 1) (for a
    check of a group-sequential design, its look's boundary recomputed for that share), as
    must every smaller one; a FAIL that does not hold becomes INCONCLUSIVE and says why.
    ``alpha``: what this comparison may spend, 2.5% alone or its share of a command's
    ``family`` of comparisons (:func:`one_family`). Checks with no interval (an accuracy
    gate, too few repeats) are left as they are."""
    p_values = {i: p for i, c in enumerate(checks) if (p := fail_p_value(c)) is not None}
    m = len(p_values)
    if m == 0 or (m == 1 and alpha >= ALPHA / 2):  # judged at its own level already
        return list(checks)
    judged = list(p_values)
    kept = {judged[k] for k in holm_kept([p_values[i] for i in judged], alpha,
                                         levels_at=[checks[i].level for i in judged])}
    out = []
    for index, check in enumerate(checks):
        if check.verdict == "FAIL" and index in p_values and index not in kept:
            check = replace(check, verdict="INCONCLUSIVE", reason=(
                f"{check.reason} at its own 95%, but not {_family_words(m, family)} "
                f"(p = {p_values[index]:.4f}): {advice(check)}"))
        out.append(check)
    return out


def _family_words(checks: int, family: int) -> str:
    if family == 1:
        return f"once the {checks} checks are judged as one family (Holm)"
    within = f", Holm over its {checks} checks" if checks > 1 else ""
    return (f"at its workload's share of the command's 2.5% (split over the {family} "
            f"workloads judged as one family{within})")


def one_family(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """Comparisons that one command judges together, as one family: each gets an equal
    share of the 2.5% (Bonferroni between comparisons) and :func:`holm` within it, so a
    command judging several workloads makes one error-rate statement, not one per
    workload. The share, unlike one Holm over every check, is known to a series' looks
    before the later workloads run (vgpu.results.verdict.sequential.Design.family)."""
    family = len(comparisons)
    if family < 2:
        return list(comparisons)
    return [replace(c, checks=holm(c.checks, ALPHA / 2 / family, family))
            for c in comparisons]


def overall_verdict(checks: Sequence[Check], shortfalls: Sequence[str] = ()) -> Verdict:
    verdicts = {c.verdict for c in checks}
    if not checks:
        return "INCONCLUSIVE"
    if "FAIL" in verdicts:
        return "FAIL"
    if "INCONCLUSIVE" in verdicts or shortfalls:
        return "INCONCLUSIVE"
    return "PASS"


def why_not_pass(checks: Sequence[Check], shortfalls: Sequence[str] = ()) -> list[str]:
    """Each check that keeps a comparison from PASS, with its reason (for an INCONCLUSIVE,
    what would decide it), and the series' shortfalls (too few VALID or undisturbed
    repeats)."""
    return [*(f"{c.metric} {c.verdict}: {c.reason}" for c in checks if c.verdict != "PASS"),
            *shortfalls]


@dataclass(frozen=True)
class PlatformChange:
    """A platform record field whose value differs between candidate and reference."""

    field: str
    candidate: str | None
    reference: str | None

    def as_dict(self) -> dict[str, str | None]:
        return {"field": self.field, "candidate": self.candidate,
                "reference": self.reference}


@dataclass(frozen=True)
class Comparison:
    """A named comparison: candidate vs reference with its checks and overall verdict,
    the platform fields that differ between the two, and why the repeats cannot support a
    PASS (``shortfalls``: too few VALID repeats)."""

    kind: ComparisonKind
    title: str
    candidate: str
    reference: str
    checks: list[Check] = field(default_factory=list)
    platform_changes: list[PlatformChange] = field(default_factory=list)
    shortfalls: list[str] = field(default_factory=list)
    # runs other load disturbed (SeriesData.disturbances): no PASS and no FAIL
    disturbed: list[str] = field(default_factory=list)
    # what the design cannot separate from the difference (CarryOver.describe): no PASS
    # and no FAIL
    confounded: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        object.__setattr__(self, "checks", holm(self.checks))

    @property
    def verdict(self) -> Verdict:
        if self.disturbed or self.confounded:
            return "INCONCLUSIVE"
        return overall_verdict(self.checks, self.shortfalls)

    @property
    def why(self) -> list[str]:
        """Why it is not a PASS and what would decide it (empty for a PASS)."""
        return [*self.disturbed, *self.confounded,
                *why_not_pass(self.checks, self.shortfalls)]

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "title": self.title,
            "candidate": self.candidate,
            "reference": self.reference,
            "verdict": self.verdict,
            "checks": [check_as_dict(c) for c in self.checks],
            "platform_changes": [c.as_dict() for c in self.platform_changes],
            "shortfalls": list(self.shortfalls),
            "disturbed": list(self.disturbed),
            "confounded": list(self.confounded),
        }


def _summary_dict(summary: Summary | None) -> dict[str, object] | None:
    if summary is None:
        return None
    return {
        "n": summary.n, "mean": summary.mean, "stdev": summary.stdev,
        "ci95_low": summary.ci_low, "ci95_high": summary.ci_high, "mdd": summary.mdd,
    }


def check_as_dict(check: Check) -> dict[str, object]:
    return {
        "metric": check.metric,
        "unit": check.unit,
        "verdict": check.verdict,
        "reason": check.reason,
        "ratio": check.ratio,
        "difference_pct": check.difference_pct,
        "ci95_pct": list(check.ci_pct) if check.ci_pct else None,
        "one_sided_level": check.level() if check.se_pct is not None else None,
        "looks": list(check.looks) or None,
        "last_look": check.last_look or None,
        "mdd_pct": check.mdd_pct,
        "design": check.design,
        "se_pct": check.se_pct,
        "df": check.df,
        "log_difference": check.log_difference,
        "noise": check.noise,
        "band_pct": {"lower": check.band.lower_pct, "upper": check.band.upper_pct},
        "candidate": _summary_dict(check.candidate),
        "reference": _summary_dict(check.reference),
        "reference_mean": check.reference_mean,
    }
