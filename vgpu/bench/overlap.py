"""How much of a round's timed span had every instance running, and each instance's
throughput inside the window they all shared, from the completion timelines the harness
records (result.json ``sut.completions``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from loadgen.contract import (
    WARMUP_SPREAD,
    WARMUP_STABLE,
    WARMUP_WINDOW,
    RunResult,
    Timeline,
    metric_unit,
    metrics_of,
)
from vgpu.results.store.records import Metric
from vgpu.results.store.series import TIMED_OVERLAP

COMMON_WINDOW_THROUGHPUT = "throughput_common_window"


@dataclass(frozen=True)
class Overlap:
    fraction: float  # the shared window over the whole span, first start to last end
    common_s: float  # length of the window in which every instance was running
    throughput: dict[str, float]  # instance -> samples/s completed inside that window


def _samples_at(timeline: Timeline, moment: float) -> float:
    return float(np.interp(moment, timeline.unix, timeline.samples))


def round_overlap(results: Mapping[str, RunResult]) -> Overlap | None:
    """None unless every instance reported its timed span."""
    spans = {name: (r.timed_start_unix, r.timed_end_unix) for name, r in results.items()}
    if not spans or any(start is None or end is None for start, end in spans.values()):
        return None
    first = min(start for start, _ in spans.values())
    last = max(end for _, end in spans.values())
    common_start = max(start for start, _ in spans.values())
    common_end = min(end for _, end in spans.values())
    common = max(0.0, common_end - common_start)
    fraction = common / (last - first) if last > first else 0.0
    throughput = {}
    for name, result in results.items():
        timeline = result.completions
        if common > 0 and timeline and len(timeline.unix) >= 2:
            done = _samples_at(timeline, common_end) - _samples_at(timeline, common_start)
            throughput[name] = done / common
    return Overlap(fraction=fraction, common_s=common, throughput=throughput)


def overlap_metrics(overlap: Overlap | None) -> list[Metric]:
    """The run's overlap fraction and each instance's throughput in the shared window."""
    if overlap is None:
        return []
    return [Metric(TIMED_OVERLAP, overlap.fraction, "fraction"),
            *(Metric(COMMON_WINDOW_THROUGHPUT, rate, "samples/s", name)
              for name, rate in overlap.throughput.items())]


def stability_metrics(instance: str, result: RunResult) -> list[Metric]:
    """The harness's warm-up windows (samples/s each), whether they settled and their
    final spread, as metrics of the instance."""
    if result.stability is None:
        return []
    values = metrics_of(result)
    windows = len(result.stability.windows_samples_per_s)
    names = [*(WARMUP_WINDOW.format(n) for n in range(1, windows + 1)),
             WARMUP_STABLE, WARMUP_SPREAD]
    return [Metric(name, values[name], metric_unit(name), instance) for name in names]
