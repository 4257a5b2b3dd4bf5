"""Numbers for people: every figure in the report, the bench summary and `vgpu results
--run` goes through here, so one run reads the same everywhere: 16,216 samples/s,
11.2 ms, +1.52%; never 1.521e+04."""

from __future__ import annotations

import math

MISSING = "-"
SIGNIFICANT = 3
_NS_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))


def number(value: float | None, significant: int = SIGNIFICANT) -> str:
    """Thousands separated above 1,000 (no decimals), else ``significant`` digits in
    fixed notation: 16,216 / 512 / 11.2 / 0.0123."""
    if value is None or math.isnan(value):
        return MISSING
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 999.5:  # what rounds to four digits gets its separator too
        return f"{value:,.0f}"
    decimals = max(0, significant - 1 - math.floor(math.log10(magnitude)))
    return f"{value:.{decimals}f}"


def quantity(value: float | None, unit: str) -> str:
    """``number`` with its unit: "16,216 samples/s"; "-" alone when missing."""
    shown = number(value)
    return shown if shown == MISSING or not unit else f"{shown} {unit}"


def duration_ns(nanoseconds: float | None) -> str:
    """A latency in the unit that keeps it short: 850 µs, 11.2 ms, 1.52 s."""
    if nanoseconds is None:
        return MISSING
    for scale, unit in _NS_UNITS:
        if abs(nanoseconds) >= scale:
            return quantity(nanoseconds / scale, unit)
    return quantity(nanoseconds, "ns")


def milliseconds(value_ms: float | None) -> str:
    return duration_ns(None if value_ms is None else value_ms * 1e6)


def signed_percent(value: float | None, decimals: int = 2) -> str:
    """A relative difference: +1.52%, -0.40%."""
    return MISSING if value is None else f"{value:+.{decimals}f}%"


def percent_interval(low: float | None, high: float | None) -> str:
    """A CI of a relative difference: [-1.20%, +0.85%]."""
    if low is None or high is None:
        return MISSING
    return f"[{signed_percent(low)}, {signed_percent(high)}]"


def ratio(value: float | None) -> str:
    """A ratio near 1 with the resolution a 2% band needs: 0.987."""
    return MISSING if value is None else f"{value:.3f}"


def ratio_interval(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return MISSING
    return f"[{ratio(low)}, {ratio(high)}]"


def mebibytes(value_bytes: float | None) -> str:
    return quantity(None if value_bytes is None else value_bytes / 2**20, "MiB")
