"""Comparisons and verdicts (pure). A check compares one metric of a candidate with a
reference and asks whether the 95% confidence interval of the relative difference lies
inside the allowed band:

- PASS: the whole interval is inside the band;
- FAIL: the whole interval is outside it;
- INCONCLUSIVE: the interval straddles a band edge (the noise is larger than what the
  tolerance allows to judge), or a side has fewer than 2 repeats (no noise estimate).

A comparison whose series have fewer VALID repeats than they ask for (``shortfalls``) is
INCONCLUSIVE where its checks would PASS; a FAIL found in the valid repeats stays FAIL.

Relative differences are in percent of the reference mean (its own uncertainty is not
propagated into the denominator). The interval depends on the design (``Check.design``):

- ``interleaved``: both sides ran in alternating blocks in one session; the interval is
  the paired t interval of the per-block differences (n - 1 df): drift between minutes
  cancels and every block's own state is in the spread;
- ``separate series``: the two series ran at different times; the standard error is
  sqrt(s_c^2/n_c + s_r^2/n_r + 2 * (series CV * reference mean)^2), the series level from
  the class's noise calibration (vgpu.results.noise) or its stated default, with
  Welch-Satterthwaite degrees of freedom over the three parts;
- ``reference value``: a one-sample t interval of the candidate around the value.

Several checks in one comparison are one family: a FAIL stands only when Holm's
step-down procedure over the checks' one-sided p-values keeps it at 2.5% (``holm``);
PASS needs every check inside its band, which needs no correction (intersection-union).
A command that judges several workloads makes them one family (``one_family``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from vgpu.results.noise import NoiseLevels
from vgpu.results.stats import (
    ALPHA,
    POWER,
    Summary,
    summarize,
    t_cdf,
    t_quantile,
)

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

    @property
    def ratio(self) -> float:
        return 1.0 + self.difference_pct / 100.0


def _judge(ci: tuple[float, float] | None, band: Band) -> tuple[Verdict, str]:
    if ci is None:
        return "INCONCLUSIVE", "fewer than 2 repeats: the noise cannot be estimated"
    low, high = ci
    below = band.lower_pct is not None and high < band.lower_pct
    above = band.upper_pct is not None and low > band.upper_pct
    if below or above:
        return "FAIL", f"95% CI [{low:+.2f}%, {high:+.2f}%] is outside {band.describe()}"
    inside_low = band.lower_pct is None or low >= band.lower_pct
    inside_high = band.upper_pct is None or high <= band.upper_pct
    if inside_low and inside_high:
        return "PASS", f"95% CI [{low:+.2f}%, {high:+.2f}%] is within {band.describe()}"
    return (
        "INCONCLUSIVE",
        f"95% CI [{low:+.2f}%, {high:+.2f}%] straddles the limit ({band.describe()}): "
        "the noise is larger than the tolerance allows to judge; add repeats",
    )


def mdd_factor(df: float) -> float:
    """t(1 - alpha/2) + t(power): a true difference this many standard errors from zero
    is detected with the wanted power."""
    return t_quantile(1 - ALPHA / 2, df) + t_quantile(POWER, df)


def _check(metric: str, unit: str, cand: Summary, ref_mean: float, ref: Summary | None,
           difference: float, variance: tuple[float, float], df: float | None,
           band: Band, design: Design, noise: str | None = None,
           fixed_df: float = math.inf) -> Check:
    """A check from a difference (metric units) and its variance split (shrinking, fixed;
    metric units squared): interval, MDD and verdict at 95%."""
    if ref_mean == 0:
        raise ValueError(f"{metric}: the reference mean is zero, no relative difference")
    scale = 100.0 / abs(ref_mean)
    shrinking, fixed = variance[0] * scale**2, variance[1] * scale**2
    difference_pct = difference * scale
    ci = se_pct = mdd_pct = None
    if df is not None:
        se_pct = math.sqrt(shrinking + fixed)
        half = t_quantile(1 - ALPHA / 2, df) * se_pct
        ci = (difference_pct - half, difference_pct + half)
        mdd_pct = mdd_factor(df) * se_pct
    verdict, reason = _judge(ci, band)
    return Check(metric=metric, unit=unit, candidate=cand, reference_mean=ref_mean,
                 reference=ref, difference_pct=difference_pct, ci_pct=ci, mdd_pct=mdd_pct,
                 band=band, verdict=verdict, reason=reason, design=design, se_pct=se_pct,
                 df=df, shrinking_var=shrinking, fixed_var=fixed, fixed_df=fixed_df,
                 noise=noise)


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
    reference calibrated from stored runs keeps."""
    if ref.mean == 0:
        raise ValueError(f"{metric}: the reference mean is zero, no relative difference")
    difference = cand.mean - ref.mean
    if cand.stdev is None or ref.stdev is None:
        return _check(metric, unit, cand, ref.mean, ref, difference, (0.0, 0.0), None, band,
                      "separate series", None if levels is None else levels.describe())
    var_c = cand.stdev**2 / cand.n
    var_r = ref.stdev**2 / ref.n
    parts = [(var_c, cand.n - 1.0), (var_r, ref.n - 1.0)]
    var_s = 0.0
    if levels is not None:
        var_s = 2.0 * (levels.series_cv * ref.mean) ** 2
        parts.append((var_s, levels.series_df))
    df = satterthwaite(parts)
    if not math.isfinite(df):  # no spread anywhere: the smallest honest df
        df = float(cand.n + ref.n - 2)
    return _check(metric, unit, cand, ref.mean, ref, difference, (var_c, var_r + var_s), df,
                  band, "separate series", None if levels is None else levels.describe(),
                  satterthwaite(parts[1:]))


def compare_paired(metric: str, candidate: Sequence[float], reference: Sequence[float],
                   band: Band, unit: str = "") -> Check:
    """Check of an interleaved design: ``candidate[i]`` and ``reference[i]`` ran in the same
    block; the paired t interval of the differences (n - 1 df)."""
    if len(candidate) != len(reference):
        raise ValueError(f"{metric}: {len(candidate)} candidate and {len(reference)} "
                         "reference blocks do not pair")
    cand, ref = summarize(candidate), summarize(reference)
    diffs = summarize([c - r for c, r in zip(candidate, reference, strict=True)])
    if diffs.stdev is None:
        return _check(metric, unit, cand, ref.mean, ref, diffs.mean, (0.0, 0.0), None, band,
                      "interleaved")
    df = float(diffs.n - 1)
    return _check(metric, unit, cand, ref.mean, ref, diffs.mean,
                  (diffs.stdev**2 / diffs.n, 0.0), df, band, "interleaved")


def check_reference(metric: str, candidate: Sequence[float], reference: Reference,
                    levels: NoiseLevels | None = None) -> Check:
    """One-sample check of candidate repeats against a reference value and its band (and
    the candidate series' own series level, when ``levels`` is given)."""
    cand = summarize(candidate)
    if reference.value == 0:
        raise ValueError(f"{metric}: the reference value is zero, no relative difference")
    difference = cand.mean - reference.value
    if cand.stdev is None:
        return _check(metric, reference.unit, cand, reference.value, None, difference,
                      (0.0, 0.0), None, reference.band, "reference value")
    var_c = cand.stdev**2 / cand.n
    parts = [(var_c, cand.n - 1.0)]
    var_s = 0.0
    if levels is not None:
        var_s = (levels.series_cv * reference.value) ** 2
        parts.append((var_s, levels.series_df))
    df = satterthwaite(parts)
    if not math.isfinite(df):
        df = float(cand.n - 1)
    return _check(metric, reference.unit, cand, reference.value, None, difference,
                  (var_c, var_s), df, reference.band, "reference value",
                  None if levels is None else levels.describe(), satterthwaite(parts[1:]))


def fail_p_value(check: Check) -> float | None:
    """One-sided p-value of 'the true difference is inside the band' against a FAIL."""
    if check.se_pct is None or check.df is None:
        return None
    if check.se_pct == 0:
        return 0.0 if check.verdict == "FAIL" else 1.0
    ps = []
    if check.band.lower_pct is not None:
        ps.append(t_cdf((check.difference_pct - check.band.lower_pct) / check.se_pct,
                        check.df))
    if check.band.upper_pct is not None:
        ps.append(1.0 - t_cdf((check.difference_pct - check.band.upper_pct) / check.se_pct,
                              check.df))
    return min(ps) if ps else None


def holm(checks: Sequence[Check]) -> list[Check]:
    """The checks with Holm's step-down procedure over their FAILs: the j-th smallest
    FAIL p-value of the m statistical checks must be <= 2.5% / (m - j + 1), as must every
    smaller one; a FAIL that does not hold in the family becomes INCONCLUSIVE and says
    why. Checks with no interval (an accuracy gate, too few repeats) are left as they
    are."""
    p_values = {i: p for i, c in enumerate(checks) if (p := fail_p_value(c)) is not None}
    m = len(p_values)
    if m < 2:
        return list(checks)
    kept: set[int] = set()
    for rank, index in enumerate(sorted(p_values, key=p_values.__getitem__)):
        if p_values[index] > (ALPHA / 2) / (m - rank):
            break
        kept.add(index)
    out = []
    for index, check in enumerate(checks):
        if check.verdict == "FAIL" and index in p_values and index not in kept:
            check = replace(check, verdict="INCONCLUSIVE", reason=(
                f"{check.reason} at its own 95%, but not once the {m} checks are judged "
                f"as one family (Holm, p = {p_values[index]:.4f}): repeat to confirm"))
        out.append(check)
    return out


def one_family(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """Comparisons that one command judges together, as one family: :func:`holm` over
    every check of every comparison, so a command judging several workloads makes one
    error-rate statement, not one per workload; each comparison keeps its own checks."""
    checks = holm([check for comparison in comparisons for check in comparison.checks])
    out, start = [], 0
    for comparison in comparisons:
        end = start + len(comparison.checks)
        out.append(replace(comparison, checks=checks[start:end]))
        start = end
    return out


def overall_verdict(checks: Sequence[Check], shortfalls: Sequence[str] = ()) -> Verdict:
    verdicts = {c.verdict for c in checks}
    if not checks:
        return "INCONCLUSIVE"
    if "FAIL" in verdicts:
        return "FAIL"
    if "INCONCLUSIVE" in verdicts or shortfalls:
        return "INCONCLUSIVE"
    return "PASS"


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "checks", holm(self.checks))

    @property
    def verdict(self) -> Verdict:
        return overall_verdict(self.checks, self.shortfalls)

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
        "mdd_pct": check.mdd_pct,
        "design": check.design,
        "se_pct": check.se_pct,
        "df": check.df,
        "noise": check.noise,
        "band_pct": {"lower": check.band.lower_pct, "upper": check.band.upper_pct},
        "candidate": _summary_dict(check.candidate),
        "reference": _summary_dict(check.reference),
        "reference_mean": check.reference_mean,
    }
