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

A comparison never uses the point estimate of the series level, which is 0 whenever the
repeats' noise hides it: it uses its one-sided 90% upper confidence bound
(``judged_series_cv``, Graybill and Wang's modified large-sample bound on the ANOVA's mean
squares, ``bound_of_mean_squares``), which stays above 0 with any spread between the
series. The bound is then treated as known (no degrees of freedom of its own).

A class with no calibration gets the same bound computed from a measured A/A
(``MEASURED_AA``: six series of one configuration on an idle 2-core machine, bm6 /
resnet50 Offline, 3 repeats each: series means sd 1.2%, repeat CV 1.2%), which is
DEFAULT_SERIES_CV = 2.0%. Each metric has its own levels (``for_metric``): a latency is
not a throughput; a metric never calibrated gets the stated default and says so, a tail
latency (p99) the bound of its own measured A/A (``MEASURED_AA_TAIL``: 23.5%)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from vgpu.results.stats.intervals import chi2_quantile

BOUND_CONFIDENCE = 0.90  # the series level a comparison uses: its 90% upper bound
# The least series CV a baseline's own spread is judged with: three series of a quiet
# configuration can agree by chance far closer than series of it usually do. Half the
# series-means sd of MEASURED_AA (1.2%).
BASELINE_SERIES_FLOOR = 0.006

# Where a comparison's series level comes from, most specific first.
FROM_BASELINE = "baseline"  # the spread of the baseline's own series (captured together)
FROM_CLASS = "class"  # `vgpu calibrate noise` of the series' class
FROM_DEFAULT = "default"  # never calibrated: DEFAULT_SERIES_CV


class MeasuredAA(NamedTuple):
    """Summary of an A/A measurement: K series of n repeats of one configuration."""

    series: int
    repeats_each: int
    means_sd: float  # sd of the series means, relative
    repeat_cv: float  # within-series CV

    def mean_squares(self) -> tuple[float, float]:
        """(MSB, MSW) of the one-way ANOVA on relative values."""
        return self.repeats_each * self.means_sd**2, self.repeat_cv**2


# `vgpu bench --scenario bm6 -w resnet50-offline --no-baseline`, 3 repeats, six series on
# an idle 2-core machine (no GPU): series means sd 1.2%, repeat CV 1.2%.
MEASURED_AA = MeasuredAA(series=6, repeats_each=3, means_sd=0.012, repeat_cv=0.012)


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
    metric: str = ""  # the metric these levels were measured on ("": any)
    origin: str = FROM_CLASS  # FROM_BASELINE, FROM_CLASS or FROM_DEFAULT
    floor: float = 0.0  # the least series CV judged (BASELINE_SERIES_FLOOR for a baseline)
    # levels of the class's other metrics, by metric name
    others: dict[str, NoiseLevels] = field(default_factory=dict, compare=False, hash=False)

    @property
    def judged_series_cv(self) -> float:
        """The series CV a comparison uses: the stated default, or the 90% upper
        confidence bound of the calibration (never 0 when the series differ at all), at
        least ``floor``."""
        if not self.calibrated:
            return self.series_cv
        return max(series_cv_bound(self), self.floor)

    @property
    def judged_series_df(self) -> float:
        """The bound is used as known: no degrees of freedom of its own."""
        return math.inf

    def for_metric(self, metric: str) -> NoiseLevels:
        """The levels of ``metric``: its own calibration, these levels when they were
        measured on it (or on any metric), else the stated default for it."""
        if metric in self.others:
            return self.others[metric]
        if metric == self.metric or (not self.metric and (
                self.calibrated or default_series_cv(metric) == self.series_cv)):
            return self
        return uncalibrated(metric=metric)

    @property
    def judged_by(self) -> str:
        """Which series level judged, in a few words with its value."""
        level = f"{self.judged_series_cv * 100:.1f}%"
        if not self.calibrated:
            return f"uncalibrated default {level}"
        if self.origin == FROM_BASELINE:
            return f"series level {level} from this baseline's {self.series} series"
        return f"class calibration {level} ({self.series} series)"

    def describe(self) -> str:
        """Which series level judged, and its value: the baseline's own, the class
        calibration or the uncalibrated default."""
        if not self.calibrated:
            what = f" ({self.metric})" if self.metric else ""
            return (f"uncalibrated default {self.series_cv * 100:.1f}%: noise between series "
                    f"not calibrated for this class{what}: assumed CV "
                    f"{self.series_cv * 100:.1f}% (the upper bound of a measured A/A); run "
                    "`vgpu calibrate noise`")
        if self.origin == FROM_BASELINE:
            return (f"series level {self.judged_series_cv * 100:.2f}% from this baseline's "
                    f"{self.series} series (90% upper bound of their CV "
                    f"{self.series_cv * 100:.2f}%, floor {self.floor * 100:.1f}%; repeats "
                    f"{self.repeat_cv * 100:.2f}%, {self.series_df:.1f} df)")
        return (f"class calibration: noise between series CV {self.series_cv * 100:.2f}%, "
                f"judged at its 90% "
                f"upper bound {self.judged_series_cv * 100:.2f}% (repeats "
                f"{self.repeat_cv * 100:.2f}%), calibrated from {self.series} series / "
                f"{self.repeats} repeats")


def bound_of_mean_squares(msb: float, msw: float, series: int, repeats: int) -> float:
    """The 90% upper confidence bound of the between-series variance (relative), by the
    modified large-sample method of Graybill and Wang (Burdick and Graybill 1992):
    ((MSB - MSW) + sqrt(H^2 MSB^2 + G^2 MSW^2)) / n0, with H = (K - 1) / chi2(0.10, K - 1)
    - 1 and G = 1 - (N - K) / chi2(0.90, N - K); above 0 whenever the series differ."""
    k, total = series, repeats
    n0 = total / k
    h = (k - 1) / chi2_quantile(1.0 - BOUND_CONFIDENCE, k - 1) - 1.0
    g = 1.0 - (total - k) / chi2_quantile(BOUND_CONFIDENCE, total - k)
    return max(0.0, (msb - msw + math.sqrt((h * msb) ** 2 + (g * msw) ** 2)) / n0)


def series_cv_bound(levels: NoiseLevels) -> float:
    """The 90% upper confidence bound of a calibration's series CV, from its counts (MSB
    rebuilt as MSW + n0 * series variance: exact unless the estimate was cut at 0, then
    an upper value)."""
    if levels.series < 2 or levels.repeats <= levels.series:
        return levels.series_cv
    n0 = levels.repeats / levels.series
    msw, var = levels.repeat_cv**2, levels.series_cv**2
    return math.sqrt(bound_of_mean_squares(msw + n0 * var, msw, levels.series,
                                           levels.repeats))


def _default_series_cv(measured: MeasuredAA) -> float:
    msb, msw = measured.mean_squares()
    return math.sqrt(bound_of_mean_squares(msb, msw, measured.series,
                                           measured.series * measured.repeats_each))


# The series CV of a class never calibrated: the 90% upper bound of MEASURED_AA (2.0%).
DEFAULT_SERIES_CV = _default_series_cv(MEASURED_AA)
DEFAULT_SERIES_DF = math.inf  # a bound, used as known

# A tail latency is no throughput: `vgpu bench --scenario bm6 -w llm-server` at 100 q/s
# per instance (the LLM workload at a fixed rate), six series of 3 repeats on an idle
# 2-core machine: the TTFT p99 of the worst instance, series means sd 14.2%, repeat CV
# 14.9% (ITL p99 6.7% / 11.7%, resnet50's latency_p99_worst alike). The throughput's 2.0%
# judged such p99s of identical configurations FAIL.
MEASURED_AA_TAIL = MeasuredAA(series=6, repeats_each=3, means_sd=0.142, repeat_cv=0.149)
DEFAULT_TAIL_SERIES_CV = _default_series_cv(MEASURED_AA_TAIL)  # 23.5%


def is_tail_latency(metric: str) -> bool:
    """A p99 latency (time to first token, inter-token gap, a query's latency)."""
    return "p99" in metric


def default_series_cv(metric: str) -> float:
    """The stated series CV of ``metric`` where its class was never calibrated."""
    return DEFAULT_TAIL_SERIES_CV if is_tail_latency(metric) else DEFAULT_SERIES_CV


def uncalibrated(repeat_cv: float = 0.0, metric: str = "") -> NoiseLevels:
    return NoiseLevels(repeat_cv=repeat_cv, series_cv=default_series_cv(metric),
                       series_df=DEFAULT_SERIES_DF, series=0, repeats=0, calibrated=False,
                       source="default", metric=metric, origin=FROM_DEFAULT)


def with_metrics(levels: NoiseLevels, others: dict[str, NoiseLevels]) -> NoiseLevels:
    """``levels`` carrying the class's levels of other metrics."""
    return replace(levels, others=dict(others))


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
    decision at the wanted power): ceil(2 * series_cv^2 * factor^2 / distance^2), with
    the series CV a comparison uses."""
    return series_per_side(2.0 * (levels.judged_series_cv * 100.0) ** 2, distance_pct,
                           factor)


def series_per_side(unshrinkable_var_pct2: float, distance_pct: float, factor: float) -> int:
    """Series per side that divide a difference's variance that repeats cannot shrink
    (percent squared, both sides together) enough for ``factor`` standard errors to fit
    in ``distance_pct``."""
    if distance_pct <= 0:
        return 0
    return max(1, math.ceil(unshrinkable_var_pct2 * factor**2 / distance_pct**2))
