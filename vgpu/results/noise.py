"""Levels of noise (pure): how much a measurement varies between back-to-back repeats of one
series, and how much more between series of the same configuration run at other times
(another minute, process and memory layout, clock and thermal state, other tenants; on a
lab also another host boot). Repeats share their series' state, so their spread says
nothing about the second level; a comparison between two series must carry both.

The estimator is the one-way random-effects ANOVA (method of moments) on values relative
to the grand mean, for K series of n_i repeats (N in all):

    MSW = sum_i sum_j (x_ij - mean_i)^2 / (N - K)                 repeat level, N - K df
    MSB = sum_i n_i (mean_i - mean)^2 / (K - 1)
    n0  = (N - sum_i n_i^2 / N) / (K - 1)                         (n for balanced series)
    series variance = max(0, (MSB - MSW) / n0)                    Satterthwaite df

A class with no calibration gets DEFAULT_SERIES_CV with DEFAULT_SERIES_DF degrees of
freedom: a stated, conservative guess that lets a large regression FAIL and keeps a
2% tolerance from ever passing on it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Conservative defaults for a class never calibrated (vgpu calibrate noise): between-series
# CV 2%, weighted as if estimated from 5 series. A shared 2-core CPU measured 0.9-2.6%.
DEFAULT_SERIES_CV = 0.02
DEFAULT_SERIES_DF = 4.0


@dataclass(frozen=True)
class NoiseLevels:
    """Relative standard deviations (fractions of the mean) at the repeat and the series
    level, and what they rest on. ``calibrated`` False: the stated defaults."""

    repeat_cv: float
    series_cv: float
    series_df: float
    series: int
    repeats: int
    calibrated: bool = True
    measured_at: float | None = None  # unix time of the newest series used
    source: str = ""  # e.g. "vgpu calibrate noise, 5 series" or the class key

    def describe(self) -> str:
        if not self.calibrated:
            return (f"noise between series not calibrated for this class: assumed CV "
                    f"{self.series_cv * 100:.1f}%; run `vgpu calibrate noise`")
        return (f"noise between series CV {self.series_cv * 100:.2f}% (repeats "
                f"{self.repeat_cv * 100:.2f}%), calibrated from {self.series} series / "
                f"{self.repeats} repeats")


def uncalibrated(repeat_cv: float = 0.0) -> NoiseLevels:
    return NoiseLevels(repeat_cv=repeat_cv, series_cv=DEFAULT_SERIES_CV,
                       series_df=DEFAULT_SERIES_DF, series=0, repeats=0, calibrated=False,
                       source="default")


def estimate_levels(series: Sequence[Sequence[float]], *, measured_at: float | None = None,
                    source: str = "") -> NoiseLevels:
    """Repeat and series components of the relative variance of ``series`` (each a list of
    repeat values of one configuration); needs 2 series and one with 2 repeats."""
    groups = [list(values) for values in series if values]
    k = len(groups)
    total = sum(len(g) for g in groups)
    if k < 2 or total - k < 1:
        raise ValueError("noise levels need at least 2 series and one with 2 repeats")
    grand = math.fsum(v for g in groups for v in g) / total
    if grand == 0:
        raise ValueError("the values average zero: no relative noise")
    rel = [[v / grand for v in g] for g in groups]
    means = [math.fsum(g) / len(g) for g in rel]
    within = math.fsum((v - m) ** 2 for g, m in zip(rel, means, strict=True) for v in g)
    msw = within / (total - k)
    msb = math.fsum(len(g) * (m - 1.0) ** 2 for g, m in zip(rel, means, strict=True)) / (k - 1)
    n0 = (total - math.fsum(len(g) ** 2 for g in rel) / total) / (k - 1)
    between = max(0.0, (msb - msw) / n0)
    if between > 0:
        df = (msb - msw) ** 2 / (msb**2 / (k - 1) + msw**2 / (total - k))
    else:
        df = float(k - 1)
    return NoiseLevels(repeat_cv=math.sqrt(msw), series_cv=math.sqrt(between),
                       series_df=max(1.0, df), series=k, repeats=total,
                       measured_at=measured_at, source=source)


def series_needed(levels: NoiseLevels, distance_pct: float, factor: float) -> int:
    """Series per side whose means, averaged, bring the between-series part of a
    difference's error under ``distance_pct`` / ``factor`` (the t-quantiles sum of a
    decision at the wanted power): ceil(2 * series_cv^2 * factor^2 / distance^2)."""
    return series_per_side(2.0 * (levels.series_cv * 100.0) ** 2, distance_pct, factor)


def series_per_side(unshrinkable_var_pct2: float, distance_pct: float, factor: float) -> int:
    """Series per side that divide a difference's variance that repeats cannot shrink
    (percent squared, both sides together) enough for ``factor`` standard errors to fit
    in ``distance_pct``."""
    if distance_pct <= 0:
        return 0
    return max(1, math.ceil(unshrinkable_var_pct2 * factor**2 / distance_pct**2))
