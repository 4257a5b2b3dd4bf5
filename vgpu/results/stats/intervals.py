"""Repeat statistics: mean, standard deviation, Student-t confidence intervals and the
minimum detectable difference. Pure functions, no scipy: the t distribution is computed
exactly from the regularised incomplete beta function."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95
ALPHA = 1.0 - CONFIDENCE
POWER = 0.80
LARGE_DF = 1e7  # above it, Student's t is the normal to 1e-7


def _incomplete_beta_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction for I_x(a, b) (modified Lentz), valid for x < (a+1)/(a+b+2)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the CDF of the Beta(a, b) distribution at x."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
        + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _incomplete_beta_fraction(a, b, x) / a
    return 1.0 - front * _incomplete_beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom (the normal beyond
    LARGE_DF, where the incomplete beta loses its precision)."""
    if df > LARGE_DF:
        return normal_cdf(t)
    tail = 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t value with P(T <= t) = p (bisection on the exact CDF)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability must be in (0, 1), got {p}")
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df > LARGE_DF:
        return normal_quantile(p)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if t_cdf(mid, df) < p:
            low = mid
        else:
            high = mid
        if high - low < 1e-12 * max(1.0, high):
            break
    return 0.5 * (low + high)


@dataclass(frozen=True)
class Summary:
    """Statistics of one quantity measured over ``n`` repeats. ``half_width`` (the 95% CI
    half width) and ``mdd`` are None when n < 2: one repeat says nothing about noise."""

    n: int
    mean: float
    stdev: float | None
    half_width: float | None
    mdd: float | None

    @property
    def ci_low(self) -> float | None:
        return None if self.half_width is None else self.mean - self.half_width

    @property
    def ci_high(self) -> float | None:
        return None if self.half_width is None else self.mean + self.half_width

    @property
    def relative_stdev(self) -> float | None:
        if self.stdev is None or self.mean == 0:
            return None
        return self.stdev / abs(self.mean)


def minimum_detectable_difference(stdev: float, n: int) -> float:
    """Smallest true difference between two means of ``n`` repeats each (same noise
    ``stdev``) that a two-sided two-sample t-test at alpha 0.05 detects with power 0.8:
    (t_{1-alpha/2, 2n-2} + t_{power, 2n-2}) * stdev * sqrt(2/n)."""
    if n < 2:
        raise ValueError("the minimum detectable difference needs at least 2 repeats")
    df = 2 * n - 2
    factor = t_quantile(1.0 - ALPHA / 2.0, df) + t_quantile(POWER, df)
    return factor * stdev * math.sqrt(2.0 / n)


def summarize(values: Sequence[float]) -> Summary:
    """Mean, sample standard deviation, 95% CI half width and MDD of ``values``."""
    n = len(values)
    if n == 0:
        raise ValueError("cannot summarise zero values")
    mean = math.fsum(values) / n
    if n < 2:
        return Summary(n=n, mean=mean, stdev=None, half_width=None, mdd=None)
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    stdev = math.sqrt(variance)
    half_width = t_quantile(1.0 - ALPHA / 2.0, n - 1) * stdev / math.sqrt(n)
    return Summary(
        n=n, mean=mean, stdev=stdev, half_width=half_width,
        mdd=minimum_detectable_difference(stdev, n),
    )


def system_totals(per_instance: Mapping[str, Sequence[float]]) -> list[float]:
    """System value per repeat: the sum over instances of that repeat's values. Every
    instance must have one value per repeat."""
    lengths = {len(v) for v in per_instance.values()}
    if len(lengths) > 1:
        raise ValueError(f"instances have different repeat counts: {sorted(lengths)}")
    if not per_instance:
        return []
    repeats = lengths.pop()
    return [math.fsum(values[i] for values in per_instance.values()) for i in range(repeats)]


@dataclass(frozen=True)
class DifferenceInterval:
    """Welch two-sample interval for mean(candidate) - mean(reference)."""

    difference: float
    half_width: float | None
    df: float | None

    @property
    def low(self) -> float | None:
        return None if self.half_width is None else self.difference - self.half_width

    @property
    def high(self) -> float | None:
        return None if self.half_width is None else self.difference + self.half_width


def difference_interval(candidate: Summary, reference: Summary) -> DifferenceInterval:
    """95% Welch-Satterthwaite interval for the difference of two means."""
    difference = candidate.mean - reference.mean
    if candidate.stdev is None or reference.stdev is None:
        return DifferenceInterval(difference=difference, half_width=None, df=None)
    var_c = candidate.stdev**2 / candidate.n
    var_r = reference.stdev**2 / reference.n
    se = math.sqrt(var_c + var_r)
    if se == 0.0:
        return DifferenceInterval(difference=difference, half_width=0.0, df=None)
    df = (var_c + var_r) ** 2 / (
        var_c**2 / (candidate.n - 1) + var_r**2 / (reference.n - 1)
    )
    half_width = t_quantile(1.0 - ALPHA / 2.0, df) * se
    return DifferenceInterval(difference=difference, half_width=half_width, df=df)


def normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def normal_quantile(p: float) -> float:
    """The z with Phi(z) = p (bisection on math.erfc)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability must be in (0, 1), got {p}")
    low, high = -40.0, 40.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if normal_cdf(mid) < p:
            low = mid
        else:
            high = mid
        if high - low < 1e-13:
            break
    return 0.5 * (low + high)


def _lower_gamma_regularized(a: float, x: float) -> float:
    """P(a, x): the regularised lower incomplete gamma function (series for x < a + 1,
    continued fraction above)."""
    if x <= 0.0:
        return 0.0
    log_front = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        ap = a
        for _ in range(1000):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return total * math.exp(log_front)
    tiny = 1e-300
    b = x + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return 1.0 - math.exp(log_front) * h


def chi2_quantile(p: float, df: float) -> float:
    """The x with P(chi-square(df) <= x) = p (bisection on the incomplete gamma)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability must be in (0, 1), got {p}")
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    low, high = 0.0, max(1.0, df)
    while _lower_gamma_regularized(df / 2.0, high / 2.0) < p:
        high *= 2.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if _lower_gamma_regularized(df / 2.0, mid / 2.0) < p:
            low = mid
        else:
            high = mid
        if high - low < 1e-12 * max(1.0, high):
            break
    return 0.5 * (low + high)


def variance_upper_bound(variance: float, df: float, confidence: float) -> float:
    """One-sided upper confidence bound of a variance estimated with ``df`` degrees of
    freedom: df * s^2 / chi2(1 - confidence, df)."""
    return df * variance / chi2_quantile(1.0 - confidence, df)
