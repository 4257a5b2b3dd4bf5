"""PNG charts of stored results (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from vgpu.results.stats.intervals import summarize
from vgpu.results.store.records import LATENCY_PERCENTILES
from vgpu.results.store.series import SYSTEM_THROUGHPUT, SeriesData
from vgpu.results.views.format import number
from vgpu.results.views.telemetry_view import InstanceTelemetry

TARGET_COLOURS = {"bare-metal": "#4c72b0", "vm": "#dd8452", "local": "#55a868"}
VERDICT_COLOURS = {"PASS": "#2e7d32", "FAIL": "#c62828", "INCONCLUSIVE": "#b8860b"}
_PERCENTILE_LABELS = {"p99_9": "p99.9"}


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()


def _short(series: SeriesData) -> str:
    model = series.identity.name
    scenario = series.scenario_id
    shown = f"s{scenario}" if scenario.isdigit() else scenario  # "s6", but "bm6"
    return f"{shown} {model}\n{series.target_kind} #{series.runs[0].id}"


@dataclass(frozen=True)
class RatioPoint:
    """One verdict row drawn: candidate / reference with the ratio's 95% CI and the
    allowed band (None: unbounded on that side)."""

    label: str
    ratio: float
    ci: tuple[float, float] | None
    band: tuple[float | None, float | None]
    verdict: str


def verdict_ratios(points: Sequence[RatioPoint]) -> bytes:
    """Each row's ratio with its CI whiskers over its tolerance band (shaded) and the
    line of equality: PASS where the whole whisker lies in the shade."""
    figure, axes = plt.subplots(figsize=(8, 1.0 + 0.6 * len(points)))
    edges = [1.0]
    for y, point in enumerate(points):
        low, high = point.band
        axes.fill_betweenx([y - 0.35, y + 0.35], low if low is not None else 0.0,
                           high if high is not None else 10.0, color="#c8e6c9",
                           label="tolerance band" if y == 0 else None)
        error = None
        if point.ci is not None:
            error = [[point.ratio - point.ci[0]], [point.ci[1] - point.ratio]]
            edges += list(point.ci)
        axes.errorbar(point.ratio, y, xerr=error, fmt="o", capsize=5, markersize=7,
                      color=VERDICT_COLOURS.get(point.verdict, "#555555"))
        edges += [v for v in (low, high, point.ratio) if v is not None]
    axes.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    span = max(max(edges) - 1.0, 1.0 - min(edges), 0.01) * 1.3
    axes.set_xlim(1.0 - span, 1.0 + span)
    axes.set_ylim(-0.6, len(points) - 0.4)
    axes.set_yticks(range(len(points)), [f"{p.label} ({p.verdict})" for p in points],
                    fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel("throughput ratio (candidate / reference), 95% CI")
    axes.set_title("Verdicts: ratio and 95% CI against the tolerance band (shaded)")
    axes.legend(loc="lower right", fontsize=8)
    return _png(figure)


def workload_panel(series: Sequence[SeriesData]) -> bytes:
    """One workload (one model, so one scale): system throughput of each series with 95%
    CI whiskers, and its instances' latency percentiles."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    shown = [s for s in series if SYSTEM_THROUGHPUT in s.samples]
    for x, data in enumerate(shown):
        summary = summarize(data.samples[SYSTEM_THROUGHPUT].values)
        error = [[summary.half_width or 0.0], [summary.half_width or 0.0]]
        left.bar(x, summary.mean, width=0.6, yerr=error, capsize=4,
                 color=TARGET_COLOURS.get(data.target_kind, "#8172b2"))
        left.annotate(number(summary.mean), (x, summary.mean), ha="center", va="bottom",
                      xytext=(0, 3), textcoords="offset points", fontsize=8)
    left.set_xticks(range(len(shown)), [_short(s) for s in shown], fontsize=8)
    left.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: number(v)))
    left.set_ylabel("system throughput (samples/s)")
    left.set_title("System throughput, mean and 95% CI", fontsize=10)
    _latency_axes(right, series)
    figure.suptitle(series[0].workload, fontsize=10)
    return _png(figure)


def _latency_axes(axes: Axes, series: Sequence[SeriesData]) -> None:
    labels = [_PERCENTILE_LABELS.get(k, k) for k in LATENCY_PERCENTILES]
    for data in series:
        for name, per_key in data.latency_percentiles_ms().items():
            points = [per_key.get(k) for k in LATENCY_PERCENTILES]
            if all(p is not None and p > 0 for p in points):
                axes.plot(labels, points, marker="o",
                          label=f"#{data.runs[0].id} s{data.scenario_id} {name}")
    axes.set_yscale("log")
    axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: number(v)))
    axes.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: number(v)))
    axes.tick_params(axis="y", which="minor", labelsize=7)
    axes.set_ylabel("latency (ms)")
    axes.set_title("Latency percentiles per instance (mean over repeats)", fontsize=10)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=7, ncol=2)


def _telemetry_axes(axes: Axes, item: InstanceTelemetry) -> None:
    points = item.series.get("gpu_util", [])
    end = max([item.duration_s or 0.0, *(t for t, _ in points)]) or 1.0
    if points:
        axes.plot([t for t, _ in points], [v for _, v in points], color="#4c72b0",
                  label="GPU util %")
    else:
        note = item.readings["gpu_util"].note or "not recorded"
        axes.text(0.01, 0.92, f"GPU util: {note}", transform=axes.transAxes, fontsize=8,
                  color="#8a4b00", va="top")
    cpu = item.readings["process_cpu_pct"]
    for value, style, what in ((cpu.mean, "--", "mean"), (cpu.maximum, ":", "max")):
        if value is not None:
            axes.hlines(value, 0.0, end, colors="#dd8452", linestyles=style,
                        label=f"process CPU {what} {number(value)} % (of one core)")
    axes.set_xlim(0.0, end)
    axes.set_ylim(0.0, max(100.0, (cpu.maximum or 0.0) * 1.25))
    axes.set_ylabel("%")
    axes.set_title(f"{item.instance} (run {item.run_id})", fontsize=9)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=7, loc="lower right")


def telemetry_over_time(items: Sequence[InstanceTelemetry], title: str) -> bytes:
    """One row per instance: GPU utilisation over the timed run where NVML sampled it
    (else why not, in words), with the harness process's mean and max CPU."""
    figure, rows = plt.subplots(len(items), 1, figsize=(9, 1.2 + 1.9 * len(items)),
                                squeeze=False)
    for axes, item in zip(rows[:, 0], items, strict=True):
        _telemetry_axes(axes, item)
    rows[-1, 0].set_xlabel("seconds into the timed run")
    figure.suptitle(title, fontsize=10)
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


@dataclass(frozen=True)
class RuntimeLine:
    """One runtime's allreduce by message size: (bytes, busbw GB/s, time µs) points."""

    label: str
    points: list[tuple[int, float | None, float]]


def runtime_allreduce(lines: Sequence[RuntimeLine], title: str) -> bytes:
    """Allreduce bus bandwidth and time against message size, one line per runtime; both
    axes logarithmic (OSU's sizes double from 1 B, busbw grows by orders of magnitude)."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for line in lines:
        measured = [(size, busbw) for size, busbw, _ in line.points if busbw is not None]
        if measured:
            left.plot(*zip(*measured, strict=True), marker="o", label=line.label)
        right.plot([size for size, _, _ in line.points],
                   [time for _, _, time in line.points], marker="o", label=line.label)
    size_axis = FuncFormatter(lambda v, _pos: _size_text(v))
    for axes, label in ((left, "bus bandwidth (GB/s)"), (right, "time (µs)")):
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.xaxis.set_major_formatter(size_axis)
        axes.set_xlabel("message size")
        axes.set_ylabel(label)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=8)
    left.set_title("Allreduce bus bandwidth", fontsize=10)
    right.set_title("Allreduce time (slowest rank)", fontsize=10)
    figure.suptitle(title, fontsize=10)
    return _png(figure)


def _size_text(size: float) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size:g} B"
