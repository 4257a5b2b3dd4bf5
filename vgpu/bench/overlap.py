"""How much of a round's timed span had every instance running, and each instance's
throughput inside the window they all shared, from the completion timelines the harness
records (result.json ``sut.completions``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vgpu.results.records import Metric
from vgpu.results.series import TIMED_OVERLAP

COMMON_WINDOW_THROUGHPUT = "throughput_common_window"


@dataclass(frozen=True)
class Overlap:
    fraction: float  # the shared window over the whole span, first start to last end
    common_s: float  # length of the window in which every instance was running
    throughput: dict[str, float]  # instance -> samples/s completed inside that window


def _samples_at(timeline: Mapping[str, Any], moment: float) -> float:
    return float(np.interp(moment, timeline["unix"], timeline["samples"]))


def round_overlap(records: Mapping[str, Mapping[str, Any]]) -> Overlap | None:
    """None unless every instance reported its timed span."""
    spans = {name: (r.get("timed_start_unix"), r.get("timed_end_unix"))
             for name, r in records.items()}
    if not spans or any(start is None or end is None for start, end in spans.values()):
        return None
    first = min(start for start, _ in spans.values())
    last = max(end for _, end in spans.values())
    common_start = max(start for start, _ in spans.values())
    common_end = min(end for _, end in spans.values())
    common = max(0.0, common_end - common_start)
    fraction = common / (last - first) if last > first else 0.0
    throughput = {}
    for name, record in records.items():
        timeline = (record.get("sut") or {}).get("completions")
        if common > 0 and timeline and len(timeline.get("unix", [])) >= 2:
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


def stability_metrics(instance: str, stability: Mapping[str, Any] | None) -> list[Metric]:
    """The harness's warm-up windows (samples/s each), whether they settled and their
    final spread, as metrics of the instance."""
    if not stability:
        return []
    windows = stability.get("windows_samples_per_s") or []
    return [*(Metric(f"warmup_window_{n}", float(rate), "samples/s", instance)
              for n, rate in enumerate(windows, start=1)),
            Metric("warmup_stable", 1.0 if stability.get("stable") else 0.0, "", instance),
            Metric("warmup_spread_pct", float(stability.get("spread_pct") or 0.0), "%",
                   instance)]
