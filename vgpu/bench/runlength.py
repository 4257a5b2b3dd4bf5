"""How long a timed run lasts on a GPU (pure). MLPerf's 600 s is a rule for a published
figure (``--mlperf-rules`` keeps it); an A/B comparison needs a run long enough that its
rate's own noise is small next to the differences the verdict looks for. The Offline
probe's completion timeline says how much the rate wanders: its rate in equal windows,
their coefficient of variation at that window length less what late completion timestamps
alone explain (they do not add up over a run), and, as windows average, the run length at
which the rest falls to the target (noise ~ 1/sqrt(length)), within bounds."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loadgen.contract import RunResult, Timeline

# A run's rate noise the length aims at (percent). The A/A spread of BERT on an H200 was
# 0.5% between 5 s runs; a quarter of a percent keeps the run's own noise well below it.
TARGET_NOISE_PCT = 0.25
# At least: clocks and power settle, LoadGen's start and end are a small part of the run.
GPU_MIN_RUN_S = 10.0
GPU_MAX_RUN_S = 120.0
# Without a probe to measure (a Server run, an Offline workload with its own target_qps).
GPU_UNPROBED_RUN_S = 60.0
PROBE_WINDOWS = 8
MIN_WINDOWS = 4  # fewer spans say too little about the rate's wander
MIN_WINDOW_POINTS = 2  # completions a span covers at least


@dataclass(frozen=True)
class RunLength:
    seconds: float
    noise_pct: float | None  # the worst instance's rate CV in the probe's windows
    window_s: float | None
    reason: str


def window_rates(completions: Mapping[str, Sequence[float]], windows: int = PROBE_WINDOWS
                 ) -> list[float]:
    """The rate (samples/s) in up to ``windows`` consecutive spans of a run's completion
    timeline (``unix`` times, ``samples`` completed by then, as the harness records them),
    each span holding an equal share of its completion points, so a rate is measured
    between two completions and never miscounts a batch cut by a window's edge (with a
    few batches per window that alone would read as several percent of noise); [] when
    the timeline has too few points for MIN_WINDOWS spans of MIN_WINDOW_POINTS."""
    times, counts = list(completions.get("unix") or []), list(completions.get("samples") or [])
    if len(times) != len(counts) or len(times) < 2 or times[-1] <= times[0]:
        return []
    spans = min(windows, (len(times) - 1) // MIN_WINDOW_POINTS)
    if spans < MIN_WINDOWS:
        return []
    edges = [round(k * (len(times) - 1) / spans) for k in range(spans + 1)]
    rates = []
    for a, b in itertools.pairwise(edges):
        if times[b] <= times[a]:
            return []
        rates.append((counts[b] - counts[a]) / (times[b] - times[a]))
    return rates


def timestamp_jitter_s(times: Sequence[float]) -> float:
    """The spread of the completion timestamps around the device's own steps: a stamp
    late by e lengthens one interval and shortens the next, so intervals between
    completions that alternate that way (negative lag-1 covariance) are reporting
    jitter, not service time (which lengthens a run for good and is not removed)."""
    gaps = [b - a for a, b in itertools.pairwise(times)]
    if len(gaps) < 3:
        return 0.0
    mean = statistics.fmean(gaps)
    lagged = [(a - mean) * (b - mean) for a, b in itertools.pairwise(gaps)]
    return math.sqrt(max(0.0, -statistics.fmean(lagged)))


def gpu_run_seconds(probe_results: Mapping[str, RunResult], upper_s: float,
                    target_pct: float = TARGET_NOISE_PCT) -> RunLength:
    """The run length for the instances whose Offline probe results these are."""
    upper = min(upper_s, GPU_MAX_RUN_S)
    lower = min(GPU_MIN_RUN_S, upper)
    worst: tuple[float, float] | None = None  # (cv %, window s)
    for result in probe_results.values():
        timeline = result.completions or Timeline((), ())
        # from the second completion on: the first interval is the pipeline filling
        completions = {"unix": list(timeline.unix[1:]), "samples": list(timeline.samples[1:])}
        rates = window_rates(completions)
        if not rates:
            continue
        times = completions["unix"]
        window = (times[-1] - times[0]) / len(rates)
        spread = statistics.stdev(rates) / statistics.fmean(rates)
        # A late timestamp moves one span's end and the next one's start: its share of the
        # spread does not add up over a run, so only the rest is the rate's own wander.
        stamp = math.sqrt(2.0) * timestamp_jitter_s(times) / window
        cv = 100.0 * math.sqrt(max(0.0, spread ** 2 - stamp ** 2))
        if worst is None or cv * math.sqrt(window) > worst[0] * math.sqrt(worst[1]):
            worst = (cv, window)
    if worst is None:
        return RunLength(upper, None, None, "the probe's timeline was too short to measure "
                         f"the rate's noise: the upper bound {upper:g} s")
    cv, window = worst
    needed = window * (cv / target_pct) ** 2
    seconds = min(upper, max(lower, math.ceil(needed)))
    return RunLength(float(seconds), cv, window,
                     f"the probe's rate varied {cv:.2f}% between {window:.2f} s windows: "
                     f"{needed:.1f} s brings it to {target_pct:g}% "
                     f"(bounds {lower:g}-{upper:g} s)")
