"""The results report: one self-contained HTML file (inline CSS, PNG charts as base64 data
URIs), the same content as Markdown for wikis, and the PNGs as files."""

from __future__ import annotations

import base64
import html
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vgpu.errors import VgpuError
from vgpu.model.load import load_scenario
from vgpu.results.compare import Band, Comparison, compare_samples
from vgpu.results.judge import compare_series
from vgpu.results.platforms import FIELD_LABELS, series_platform
from vgpu.results.records import PLATFORM_COMPARED
from vgpu.results.series import SYSTEM_THROUGHPUT, SeriesData, all_series
from vgpu.results.server_split import series_split, split_rows
from vgpu.results.stats import summarize
from vgpu.results.store import ResultStore

REFERENCE_SCENARIO = "1"
INSTANCE_TABLE_SERIES = 6  # older series stay in the statistics table and in `vgpu results`
TRAINING_THROUGHPUT = "throughput"
TRAINING_WORKERS = "workers"

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;background:#fff}
h1{color:#1f3b5a}h2{border-bottom:2px solid #4c72b0;padding-bottom:.2em}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}
th{background:#e8eef6}td.t{text-align:left}
.PASS{background:#c8e6c9}.FAIL{background:#ffcdd2}.INCONCLUSIVE{background:#fff3c4}
.ok{color:#2e7d32}.failed,.aborted{color:#c62828}
img{max-width:100%;border:1px solid #ddd;margin:.5em 0}
"""


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Chart:
    filename: str
    png: bytes


@dataclass
class Report:
    """Sections in display order: each a heading with a table or a chart."""

    title: str
    generated: str
    sections: list[tuple[str, Table | Chart]] = field(default_factory=list)

    @property
    def charts(self) -> list[tuple[str, Chart]]:
        return [(h, s) for h, s in self.sections if isinstance(s, Chart)]

    def html(self) -> str:
        parts = [
            "<!DOCTYPE html><html><head><meta charset='utf-8'>",
            f"<title>{html.escape(self.title)}</title><style>{_CSS}</style></head><body>",
            f"<h1>{html.escape(self.title)}</h1><p>Generated {html.escape(self.generated)}</p>",
        ]
        for heading, section in self.sections:
            parts.append(f"<h2>{html.escape(heading)}</h2>")
            if isinstance(section, Table):
                parts.append(_html_table(section))
            else:
                data = base64.b64encode(section.png).decode("ascii")
                parts.append(
                    f"<img alt='{html.escape(heading)}' src='data:image/png;base64,{data}'>"
                )
        parts.append("</body></html>")
        return "\n".join(parts)

    def markdown(self, png_links: dict[str, str] | None = None) -> str:
        lines = [f"# {self.title}", "", f"Generated {self.generated}", ""]
        for heading, section in self.sections:
            if isinstance(section, Table):
                lines += [f"## {heading}", "", *_markdown_table(section), ""]
            elif png_links and section.filename in png_links:
                link = png_links[section.filename]
                lines += [f"## {heading}", "", f"![{heading}]({link})", ""]
        return "\n".join(lines)


def _cell_class(text: str) -> str:
    if text in ("PASS", "FAIL", "INCONCLUSIVE", "ok", "failed", "aborted"):
        return f" class='{text}'"
    return "" if _is_number(text) else " class='t'"


def _is_number(text: str) -> bool:
    try:
        float(text.rstrip("%").replace(",", ""))
    except ValueError:
        return False
    return True


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.headers)
    body = "".join(
        "<tr>" + "".join(f"<td{_cell_class(c)}>{html.escape(c)}</td>" for c in row) + "</tr>"
        for row in table.rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _markdown_table(table: Table) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(table.headers), line(["---"] * len(table.headers)),
            *(line(r) for r in table.rows)]


def _fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def series_table(series: Sequence[SeriesData]) -> Table:
    rows = []
    for data in series:
        for name, sample in data.samples.items():
            s = summarize(sample.values)
            rows.append([
                data.runs[0].id.__str__(), f"{data.scenario_id} {data.scenario_name}",
                data.workload, data.target_kind, name, sample.unit, str(s.n), _fmt(s.mean),
                _fmt(s.stdev), f"[{_fmt(s.ci_low)}, {_fmt(s.ci_high)}]", _fmt(s.mdd),
            ])
    return Table(
        ["first run", "scenario", "workload", "target", "metric", "unit", "n", "mean",
         "stdev", "95% CI", "MDD"],
        rows,
    )


def instance_table(series: Sequence[SeriesData]) -> Table:
    rows = []
    for data in series:
        for run in data.runs:
            for stored in data.instances[run.id]:
                inst = stored.result
                device = inst.mig_profile or inst.device_name or inst.device_kind or "-"
                if inst.device_note:
                    device = f"{device} ({inst.device_note})"
                rows.append([
                    str(run.id), str(run.repeat_index), inst.name, device,
                    inst.validity or "-", _fmt(inst.throughput),
                    _fmt(inst.latency_ns.get("p50", 0) / 1e6 if inst.latency_ns else None),
                    _fmt(inst.latency_ns.get("p99", 0) / 1e6 if inst.latency_ns else None),
                ])
    return Table(["run", "repeat", "instance", "device", "validity", "samples/s",
                  "p50 ms", "p99 ms"], rows)


def runs_table(store: ResultStore) -> Table:
    rows = [
        [str(r.id), r.series_id[:8], r.scenario_id, r.workload, r.target_kind, r.status,
         str(r.repeat_index), time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.started_at)),
         _fmt(None if r.sync_skew_s is None else r.sync_skew_s * 1e3, 3), r.reason or ""]
        for r in store.runs()
    ]
    return Table(["run", "series", "scenario", "workload", "target", "status", "repeat",
                  "started (UTC)", "sync skew ms", "reason"], rows)


def comparison_table(comparisons: Sequence[Comparison]) -> Table:
    rows = []
    for comparison in comparisons:
        for check in comparison.checks:
            ci = "-"
            if check.ci_pct is not None:
                ci = f"[{check.ci_pct[0]:+.2f}, {check.ci_pct[1]:+.2f}]"
            rows.append([
                comparison.title, check.metric, f"{check.ratio:.4f}",
                f"{check.difference_pct:+.2f}%", ci,
                "-" if check.mdd_pct is None else f"{check.mdd_pct:.2f}%",
                check.band.describe(), check.verdict,
            ])
    return Table(["comparison", "metric", "ratio", "difference", "95% CI (%)", "MDD",
                  "allowed", "verdict"], rows)


def platform_change_table(comparisons: Sequence[Comparison]) -> Table:
    rows = [[c.title, FIELD_LABELS.get(change.field, change.field), change.reference or "-",
             change.candidate or "-"]
            for c in comparisons for change in c.platform_changes]
    return Table(["comparison", "platform field", "reference", "candidate"], rows)


def platform_table(series: Sequence[SeriesData]) -> Table:
    """One column per series, one row per platform field any of them recorded."""
    platforms = [series_platform(data) for data in series]
    rows = [[FIELD_LABELS.get(name, name), *(p[name] or "-" for p in platforms)]
            for name in PLATFORM_COMPARED if any(p[name] for p in platforms)]
    headers = ["field", *(f"{d.scenario_id} {d.workload.split(' (')[0]} "
                          f"(run {d.runs[0].id})" for d in series)]
    return Table(headers, rows)


def _baseline_scenario(data: SeriesData) -> str | None:
    """The baseline scenario id named in the series' scenario file, if it can be read."""
    source = data.runs[0].scenario_file
    if not source or not Path(source).exists():
        return None
    try:
        scenario = load_scenario(source)
    except VgpuError:
        return None
    return scenario.baseline.scenario if scenario.baseline else None


def _latest(series: Sequence[SeriesData]) -> dict[tuple[str, str, str], SeriesData]:
    latest: dict[tuple[str, str, str], SeriesData] = {}
    for data in series:
        latest[(data.scenario_id, data.workload, data.target_kind)] = data
    return latest


def automatic_comparisons(series: Sequence[SeriesData], tolerance: float) -> list[Comparison]:
    """VM vs bare metal for every VM series whose bare-metal counterpart (the scenario's
    baseline scenario, or the same scenario) has a series of the same workload."""
    latest = _latest(series)
    comparisons = []
    for (scenario, workload, target), data in latest.items():
        if target != "vm":
            continue
        for reference_id in (_baseline_scenario(data), scenario):
            reference = latest.get((reference_id or "", workload, "bare-metal"))
            if reference is not None:
                comparisons.append(
                    compare_series("vm-vs-bare-metal", data, reference, tolerance=tolerance))
                break
    return comparisons


def scenario_gain_table(series: Sequence[SeriesData]) -> Table:
    """System throughput of each scenario relative to scenario 1 (one VM with the whole
    GPU in lab study A), same workload and target kind: the study's headline numbers."""
    latest = _latest(series)
    rows = []
    for (scenario, workload, target), data in sorted(latest.items()):
        reference = latest.get((REFERENCE_SCENARIO, workload, target))
        if scenario == REFERENCE_SCENARIO or reference is None:
            continue
        if SYSTEM_THROUGHPUT not in data.samples or SYSTEM_THROUGHPUT not in reference.samples:
            continue
        check = compare_samples(SYSTEM_THROUGHPUT, data.samples[SYSTEM_THROUGHPUT].values,
                                reference.samples[SYSTEM_THROUGHPUT].values, Band())
        ci = "-" if check.ci_pct is None else \
            f"[{check.ci_pct[0]:+.2f}, {check.ci_pct[1]:+.2f}]"
        rows.append([scenario, workload, target, f"{check.candidate.mean:.5g}",
                     f"{check.reference_mean:.5g}", f"{check.difference_pct:+.2f}%", ci])
    return Table(["scenario", "workload", "target", "samples/s",
                  f"scenario {REFERENCE_SCENARIO} samples/s", "gain", "95% CI (%)"], rows)


def _training_points(series: Sequence[SeriesData]) -> dict[str, list[tuple[float, float]]]:
    points: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for data in series:
        if TRAINING_THROUGHPUT in data.samples and TRAINING_WORKERS in data.samples:
            workers = data.samples[TRAINING_WORKERS].values[0]
            throughput = summarize(data.samples[TRAINING_THROUGHPUT].values).mean
            points[data.workload].append((workers, throughput))
    return {k: v for k, v in points.items() if len(v) >= 2}


def split_sections(store: ResultStore,
                   series: Sequence[SeriesData]) -> list[tuple[str, Table | Chart]]:
    """A small table per Triton series: the server-side time per request by instance."""
    sections: list[tuple[str, Table | Chart]] = []
    for data in series:
        split = series_split(store, data)
        if split:
            headers, rows = split_rows(split)
            sections.append((f"Triton server-side time per request (mean over repeats): "
                             f"{data.label}", Table(headers, rows)))
    return sections


def build_report(
    store: ResultStore,
    comparisons: Sequence[Comparison] = (),
    tolerance: float = 0.02,
    title: str = "vgpu benchmark report",
) -> Report:
    from vgpu.results import plots  # matplotlib: loaded only when a report is built

    series = all_series(store)
    report = Report(title=title, generated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    sections = report.sections
    judged = [*comparisons, *automatic_comparisons(series, tolerance)]
    if judged:
        sections.append(("Verdicts", comparison_table(judged)))
        changes = platform_change_table(judged)
        if changes.rows:
            sections.append(("Platform differences of the compared series", changes))
    inference = [s for s in series if s.per_instance_throughput]
    if inference:
        sections.append(("Throughput per scenario and instance",
                         Chart("throughput_instances.png",
                               plots.throughput_by_instance(inference))))
    if any(SYSTEM_THROUGHPUT in s.samples for s in series):
        sections.append(("System throughput: VM vs bare metal (95% CI)",
                         Chart("system_throughput_targets.png",
                               plots.system_throughput_by_target(series))))
    if any(s.latency_percentiles_ms() for s in inference):
        sections.append(("Latency percentiles",
                         Chart("latency_percentiles.png",
                               plots.latency_percentiles(inference[-6:]))))
    gains = scenario_gain_table(series)
    if gains.rows:
        sections.append((f"System throughput relative to scenario {REFERENCE_SCENARIO}", gains))
    training = _training_points(series)
    if training:
        sections.append(("Training speedup vs ideal",
                         Chart("training_speedup.png", plots.training_speedup(training))))
    sections.append(("Statistics per series (95% CI, MDD at alpha 0.05, power 0.8)",
                     series_table(series)))
    if series:
        sections.append(("Platform of the latest series",
                         platform_table(series[-INSTANCE_TABLE_SERIES:])))
    if inference:
        recent = inference[-INSTANCE_TABLE_SERIES:]
        sections.append((f"Instances of the latest {len(recent)} series",
                         instance_table(recent)))
        sections += split_sections(store, recent)
    sections.append(("All runs", runs_table(store)))
    return report


def write_report(
    report: Report,
    html_path: Path | None,
    markdown_path: Path | None = None,
    png_dir: Path | None = None,
) -> list[Path]:
    """Write the requested outputs; returns the paths written."""
    written: list[Path] = []
    links: dict[str, str] = {}
    if png_dir is not None:
        png_dir.mkdir(parents=True, exist_ok=True)
        for _heading, chart in report.charts:
            target = png_dir / chart.filename
            target.write_bytes(chart.png)
            written.append(target)
            links[chart.filename] = str(
                target.resolve().relative_to(markdown_path.resolve().parent)
                if markdown_path is not None and target.resolve().is_relative_to(
                    markdown_path.resolve().parent)
                else target.resolve()
            )
    if html_path is not None:
        html_path.write_text(report.html(), encoding="utf-8")
        written.append(html_path)
    if markdown_path is not None:
        markdown_path.write_text(report.markdown(links), encoding="utf-8")
        written.append(markdown_path)
    return written
