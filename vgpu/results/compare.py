"""Comparisons and verdicts (pure). A check compares one metric of a candidate with a
reference and asks whether the 95% confidence interval of the relative difference lies
inside the allowed band:

- PASS: the whole interval is inside the band;
- FAIL: the whole interval is outside it;
- INCONCLUSIVE: the interval straddles a band edge (the noise is larger than what the
  tolerance allows to judge), or a side has fewer than 2 repeats (no noise estimate).

A comparison whose series have fewer VALID repeats than they ask for (``shortfalls``) is
INCONCLUSIVE where its checks would PASS; a FAIL found in the valid repeats stays FAIL.

Relative differences are in percent of the reference mean; the interval is the Welch
interval of the difference of means divided by the reference mean (its own uncertainty
is not propagated into the denominator)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from vgpu.results.stats import (
    ALPHA,
    POWER,
    Summary,
    difference_interval,
    summarize,
    t_quantile,
)

Verdict = Literal["PASS", "FAIL", "INCONCLUSIVE"]
ComparisonKind = Literal["vm-vs-bare-metal", "scenario-vs-scenario", "run-vs-baseline"]
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


def compare_samples(
    metric: str,
    candidate: Sequence[float],
    reference: Sequence[float],
    band: Band,
    unit: str = "",
) -> Check:
    """Two-sample check: candidate repeats against reference repeats."""
    return compare_summaries(metric, summarize(candidate), summarize(reference), band, unit)


def compare_summaries(metric: str, cand: Summary, ref: Summary, band: Band,
                      unit: str = "") -> Check:
    """The two-sample check from the two sides' summaries (n, mean, stdev): what a
    reference calibrated from stored runs keeps."""
    if ref.mean == 0:
        raise ValueError(f"{metric}: the reference mean is zero, no relative difference")
    interval = difference_interval(cand, ref)
    scale = 100.0 / abs(ref.mean)
    difference_pct = interval.difference * scale
    ci = None
    if interval.low is not None and interval.high is not None:
        ci = (interval.low * scale, interval.high * scale)
    mdd_pct = None
    if cand.stdev is not None and ref.stdev is not None:
        se = math.sqrt(cand.stdev**2 / cand.n + ref.stdev**2 / ref.n)
        df = interval.df if interval.df is not None else cand.n + ref.n - 2
        factor = t_quantile(1 - ALPHA / 2, df) + t_quantile(POWER, df)
        mdd_pct = factor * se * scale
    verdict, reason = _judge(ci, band)
    return Check(
        metric=metric, unit=unit, candidate=cand, reference_mean=ref.mean, reference=ref,
        difference_pct=difference_pct, ci_pct=ci, mdd_pct=mdd_pct, band=band,
        verdict=verdict, reason=reason,
    )


def check_reference(metric: str, candidate: Sequence[float], reference: Reference) -> Check:
    """One-sample check of candidate repeats against a reference value and its band."""
    cand = summarize(candidate)
    if reference.value == 0:
        raise ValueError(f"{metric}: the reference value is zero, no relative difference")
    scale = 100.0 / abs(reference.value)
    difference_pct = (cand.mean - reference.value) * scale
    ci = None
    if cand.ci_low is not None and cand.ci_high is not None:
        ci = ((cand.ci_low - reference.value) * scale, (cand.ci_high - reference.value) * scale)
    mdd_pct = None
    if cand.stdev is not None:
        factor = t_quantile(1 - ALPHA / 2, cand.n - 1) + t_quantile(POWER, cand.n - 1)
        mdd_pct = factor * cand.stdev / math.sqrt(cand.n) * scale
    verdict, reason = _judge(ci, reference.band)
    return Check(
        metric=metric, unit=reference.unit, candidate=cand, reference_mean=reference.value,
        reference=None, difference_pct=difference_pct, ci_pct=ci, mdd_pct=mdd_pct,
        band=reference.band, verdict=verdict, reason=reason,
    )


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
        "band_pct": {"lower": check.band.lower_pct, "upper": check.band.upper_pct},
        "candidate": _summary_dict(check.candidate),
        "reference": _summary_dict(check.reference),
        "reference_mean": check.reference_mean,
    }
