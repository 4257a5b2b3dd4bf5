"""Capturing a baseline as several short series spaced in time: the last series becomes
the baseline, and the spread between all of them (between-series CV per metric, with its
degrees of freedom) is stored with it, so a later single series on that host is judged
with the noise of that configuration on that host (vgpu.results.verdict.noise_store
.levels_against) rather than a class's or the uncalibrated default."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console

from vgpu.bench.outcome import BenchOutcome
from vgpu.defaults import DEFAULT_CAPTURE_PAUSE_S, DEFAULT_CAPTURE_SERIES
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import load_series
from vgpu.results.verdict.noise_store import store_baseline_spread


@dataclass(frozen=True)
class CapturePlan:
    """How many series a baseline is captured from, and the pause between them."""

    series: int = DEFAULT_CAPTURE_SERIES
    pause_s: float = DEFAULT_CAPTURE_PAUSE_S

    def describe(self) -> str:
        if self.series == 1:
            return ("1 series per scenario: the baseline stores no spread of its own, and "
                    "verdicts against it use the class calibration or the uncalibrated "
                    "default")
        return (f"{self.series} series per scenario, {self.pause_s:.0f} s apart "
                f"(--baseline-series, --baseline-pause): about {self.series} times one "
                f"bench plus {(self.series - 1) * self.pause_s:.0f} s of pauses per "
                "scenario; the last series is the baseline, the spread of all is stored "
                "with it")


def record_spread(store: ResultStore, benches: Sequence[BenchOutcome],
                  out: Console) -> None:
    """Per workload, the spread between the series ``benches`` ran (one bench per
    captured series, the last one the baseline), stored with the last series."""
    last = benches[-1]
    for workload in last.workloads:
        if workload.series is None:
            continue
        label = workload.workload.label
        members = [load_series(store, w.series_id) for bench in benches
                   for w in bench.workloads
                   if w.workload.label == label and store.runs(series_id=w.series_id,
                                                                status="ok")]
        levels = store_baseline_spread(store, workload.series, members)
        if levels is None:
            out.print(f"{label}: captured from {len(members)} series: no spread of its "
                      "own; verdicts against it use the class calibration or the "
                      "uncalibrated default", highlight=False)
        else:
            out.print(f"{label}: {levels.judged_by} (CV {levels.series_cv * 100:.2f}%, "
                      f"{levels.series_df:.1f} df), stored with the baseline",
                      highlight=False)
