"""PNG charts of stored results (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from vgpu.results.records import LATENCY_PERCENTILES
from vgpu.results.series import SYSTEM_THROUGHPUT, SeriesData
from vgpu.results.stats import summarize

TARGET_COLOURS = {"bare-metal": "#4c72b0", "vm": "#dd8452", "local": "#55a868"}
_PERCENTILE_LABELS = {"p99_9": "p99.9"}


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()


def _short(series: SeriesData) -> str:
    model = series.workload.split()[0]
    return f"s{series.scenario_id} {model}\n{series.target_kind} #{series.runs[0].id}"


def throughput_by_instance(series: Sequence[SeriesData]) -> bytes:
    """Stacked bars: mean throughput of each instance, one bar per series."""
    figure, axes = plt.subplots(figsize=(max(6.0, 1.3 * len(series) + 2), 4.5))
    palette = plt.get_cmap("tab10")
    instance_colour: dict[str, int] = {}
    for x, data in enumerate(series):
        bottom = 0.0
        for name, values in data.per_instance_throughput.items():
            colour = instance_colour.setdefault(name, len(instance_colour))
            mean = sum(values) / len(values)
            axes.bar(x, mean, bottom=bottom, color=palette(colour % 10), edgecolor="white",
                     label=name if colour == len(instance_colour) - 1 and x == 0 else None)
            bottom += mean
    handles = [plt.Rectangle((0, 0), 1, 1, color=palette(i % 10)) for i in instance_colour.values()]
    axes.legend(handles, list(instance_colour), title="instance", fontsize=8)
    axes.set_xticks(range(len(series)), [_short(s) for s in series], fontsize=8)
    axes.set_ylabel("throughput (samples/s)")
    axes.set_title("Throughput per scenario and instance (mean over repeats)")
    return _png(figure)


def system_throughput_by_target(series: Sequence[SeriesData]) -> bytes:
    """Bars with 95% CI whiskers: system throughput per scenario/workload and target
    kind (VM vs bare metal side by side where both exist)."""
    groups: dict[str, list[SeriesData]] = defaultdict(list)
    for data in series:
        if SYSTEM_THROUGHPUT in data.samples:
            groups[f"scenario {data.scenario_id}\n{data.workload.split()[0]}"].append(data)
    figure, axes = plt.subplots(figsize=(max(6.0, 2.2 * len(groups) + 2), 4.5))
    width = 0.8
    for x, (_group, members) in enumerate(groups.items()):
        step = width / len(members)
        for k, data in enumerate(members):
            summary = summarize(data.samples[SYSTEM_THROUGHPUT].values)
            error = [[summary.half_width or 0.0], [summary.half_width or 0.0]]
            axes.bar(x - width / 2 + step * (k + 0.5), summary.mean, width=step * 0.9,
                     color=TARGET_COLOURS.get(data.target_kind, "#8172b2"), yerr=error,
                     capsize=4, label=data.target_kind)
    handles, labels = axes.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    axes.legend(unique.values(), unique.keys(), title="target")
    axes.set_xticks(range(len(groups)), list(groups), fontsize=8)
    axes.set_ylabel("system throughput (samples/s)")
    axes.set_title("System throughput by target: mean and 95% CI")
    return _png(figure)


def latency_percentiles(series: Sequence[SeriesData]) -> bytes:
    """Latency percentiles (ms, log scale) per instance of each series."""
    figure, axes = plt.subplots(figsize=(8, 4.5))
    labels = [_PERCENTILE_LABELS.get(k, k) for k in LATENCY_PERCENTILES]
    for data in series:
        for name, per_key in data.latency_percentiles_ms().items():
            points = [per_key.get(k) for k in LATENCY_PERCENTILES]
            if all(p is not None and p > 0 for p in points):
                axes.plot(labels, points, marker="o",
                          label=f"#{data.runs[0].id} s{data.scenario_id} {name}")
    axes.set_yscale("log")
    axes.set_ylabel("latency (ms)")
    axes.set_title("Latency percentiles per instance (mean over repeats)")
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=7, ncol=2)
    return _png(figure)


def training_speedup(points: dict[str, list[tuple[float, float]]]) -> bytes:
    """Speedup over the smallest worker count against ideal linear scaling.
    ``points``: workload -> [(workers, throughput)]."""
    figure, axes = plt.subplots(figsize=(7, 4.5))
    largest = 1.0
    for workload, pairs in points.items():
        pairs = sorted(pairs)
        base_workers, base_throughput = pairs[0]
        xs = [w for w, _ in pairs]
        speedups = [t / base_throughput * base_workers for _, t in pairs]
        largest = max(largest, *xs)
        axes.plot(xs, speedups, marker="o", label=workload)
    axes.plot([1, largest], [1, largest], linestyle="--", color="grey", label="ideal")
    axes.set_xlabel("workers")
    axes.set_ylabel("speedup")
    axes.set_title("Training speedup vs ideal")
    axes.legend(fontsize=8)
    return _png(figure)
