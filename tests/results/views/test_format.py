"""Numbers for people: one helper for the report, the bench summary and `results --run`."""

from __future__ import annotations

import pytest

from vgpu.results.views import format as fmt


@pytest.mark.parametrize(("value", "shown"), [
    (15210.4, "15,210"), (16216.0, "16,216"), (1_234_567.8, "1,234,568"), (999.7, "1,000"),
    (512.34, "512"), (11.24, "11.2"), (1.0, "1.00"), (0.012345, "0.0123"), (0.0, "0"),
    (-2.5, "-2.50"), (None, "-"), (float("nan"), "-"),
])
def test_number_is_never_scientific(value: float | None, shown: str) -> None:
    assert fmt.number(value) == shown


@pytest.mark.parametrize(("nanoseconds", "shown"), [
    (11.2e6, "11.2 ms"), (850e3, "850 µs"), (1.52e9, "1.52 s"), (420.0, "420 ns"),
    (2.443e9, "2.44 s"), (None, "-"),
])
def test_latency_picks_its_unit(nanoseconds: float | None, shown: str) -> None:
    assert fmt.duration_ns(nanoseconds) == shown


def test_quantities_ratios_and_percentages() -> None:
    assert fmt.quantity(16216.3, "samples/s") == "16,216 samples/s"
    assert fmt.quantity(None, "W") == "-"
    assert fmt.mebibytes(3 * 2**30) == "3,072 MiB"
    assert fmt.ratio(0.98712) == "0.987"
    assert fmt.ratio_interval(0.9812, 1.0034) == "[0.981, 1.003]"
    assert fmt.signed_percent(1.5234) == "+1.52%"
    assert fmt.percent_interval(-1.2, 0.854) == "[-1.20%, +0.85%]"
    assert fmt.milliseconds(11.2) == "11.2 ms"
