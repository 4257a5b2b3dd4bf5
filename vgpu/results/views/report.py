"""The results report: one self-contained HTML file (inline CSS, PNG charts as base64 data
URIs), the same content as Markdown for wikis, and the PNGs as files.

Read top down it answers a lab engineer's questions in order: the verdict of each
scenario and workload against its bare-metal reference (table and figure), then one panel
per workload (one model per axis), the communication runtimes' allreduce side by side,
what the runs ran on and what differed, what the GPUs and the harness did (telemetry), and
whether LoadGen found each run VALID; the statistics, instances and runs follow as the
appendix."""

from __future__ import annotations

import base64
import html
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vgpu.errors import VgpuError
from vgpu.model.load import load_scenario
from vgpu.results.stats.intervals import summarize
from vgpu.results.store.records import PLATFORM_COMPARED, Run
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import (
    SYSTEM_THROUGHPUT,
    SeriesData,
    all_series,
    latest_series,
    load_series,
)
from vgpu.results.verdict.compare import Band, Check, Comparison, compare_samples
from vgpu.results.verdict.decided import decided_by
from vgpu.results.verdict.judge import judge_stored_all
from vgpu.results.verdict.platforms import FIELD_LABELS, series_platform
from vgpu.results.verdict.referee import GAIN_REFERENCE_SCENARIO, gain_reference
from vgpu.results.views import capacity_view, telemetry_view, token_view
from vgpu.results.views import format as fmt
from vgpu.results.views.capacity_view import capacity_rows
from vgpu.results.views.server_split import series_split, split_rows
from vgpu.results.views.token_view import token_rows

if TYPE_CHECKING:
    from vgpu.results.views.allreduce_view import RuntimeProbe

INSTANCE_TABLE_SERIES = 6  # older series stay in the statistics table and in `vgpu results`
TRAINING_THROUGHPUT = "throughput"
TRAINING_WORKERS = "workers"
PROBE_HEADLINE = "busbw_peak"  # an allreduce probe's (Gloo, NCCL, MPI) peak bus bandwidth
# What plots.RatioPoint takes: label, ratio, its 95% CI, the band, the verdict.
RatioPointArgs = tuple[str, float, tuple[float, float] | None,
                       tuple[float | None, float | None], str]

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;background:#fff}
h1{color:#1f3b5a}h2{border-bottom:2px solid #4c72b0;padding-bottom:.2em}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}
th{background:#e8eef6}td.t{text-align:left}
.PASS,.VALID{background:#c8e6c9}.FAIL,.INVALID{background:#ffcdd2}
.INCONCLUSIVE,.noverdict{background:#fff3c4}
.ok{color:#2e7d32}.failed,.aborted{color:#c62828}
p.note{background:#fff8e1;border-left:4px solid #f0b400;padding:.5em .8em;max-width:60em}
img{max-width:100%;border:1px solid #ddd;margin:.5em 0}
"""
NO_VERDICT = "no verdict"  # the verdict cell of a series with nothing to be judged against
_CELL_CLASSES = {text: text for text in ("PASS", "FAIL", "INCONCLUSIVE", "VALID", "INVALID",
                                         "ok", "failed", "aborted")} | {NO_VERDICT: "noverdict"}


@dataclass(frozen=True)
class Chart:
    filename: str
    png: bytes


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    html_id: str | None = None


@dataclass(frozen=True)
class Note:
    """A sentence in place of a table or chart: what is missing and why."""

    text: str


Section = Table | Chart | Note


@dataclass
class Report:
    """Sections in display order: each a heading with a table or a chart."""

    title: str
    generated: str
    sections: list[tuple[str, Section]] = field(default_factory=list)

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
            elif isinstance(section, Note):
                parts.append(f"<p class='note'>{html.escape(section.text)}</p>")
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
            elif isinstance(section, Note):
                lines += [f"## {heading}", "", f"> {section.text}", ""]
            elif png_links and section.filename in png_links:
                link = png_links[section.filename]
                lines += [f"## {heading}", "", f"![{heading}]({link})", ""]
        return "\n".join(lines)


def _cell_class(text: str) -> str:
    if text in _CELL_CLASSES:
        return f" class='{_CELL_CLASSES[text]}'"
    return "" if _is_number(text) else " class='t'"


def _is_number(text: str) -> bool:
    """A figure, with or without its unit ("16,216", "11.2 ms", "[+0.10%, +0.90%]")."""
    first = text.split(" ")[0].strip("[],%")
    try:
        float(first.replace(",", ""))
    except ValueError:
        return False
    return True


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.headers)
    body = "".join(
        "<tr>" + "".join(f"<td{_cell_class(c)}>{html.escape(c)}</td>" for c in row) + "</tr>"
        for row in table.rows
    )
    ident = f" id='{html.escape(table.html_id)}'" if table.html_id else ""
    return f"<table{ident}><tr>{head}</tr>{body}</table>"


def _markdown_table(table: Table) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(table.headers), line(["---"] * len(table.headers)),
            *(line(r) for r in table.rows)]


def _short_workload(stored: SeriesData | Run) -> str:
    """"resnet50-offline", the workload's name (its stored identity, not its key)."""
    return stored.identity.name


def series_table(series: Sequence[SeriesData]) -> Table:
    rows = []
    for data in series:
        for name, sample in data.samples.items():
            s = summarize(sample.values)
            rows.append([
                str(data.runs[0].id), f"{data.scenario_id} {data.scenario_name}",
                data.workload, data.target_kind, name, sample.unit, str(s.n),
                fmt.number(s.mean), fmt.number(s.stdev),
                f"[{fmt.number(s.ci_low)}, {fmt.number(s.ci_high)}]", fmt.number(s.mdd),
            ])
    return Table(
        ["first run", "scenario", "workload", "target", "metric", "unit", "n", "mean",
         "stdev", "95% CI", "MDD"],
        rows,
    )


def _latency(latency_ns: dict[str, float], key: str) -> str:
    return fmt.duration_ns(latency_ns.get(key))


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
                    inst.validity or "-", fmt.number(inst.throughput),
                    _latency(inst.latency_ns, "p50"), _latency(inst.latency_ns, "p99"),
                ])
    return Table(["run", "repeat", "instance", "device", "validity", "samples/s",
                  "p50", "p99"], rows)


def runs_table(store: ResultStore, series: Sequence[SeriesData] | None = None) -> Table:
    """Every stored run, or only the runs of ``series`` (each run of theirs, whatever its
    status: the failed and aborted ones say why a series is short)."""
    runs = store.runs() if series is None else sorted(
        (run for data in series for run in store.runs(series_id=data.series_id)),
        key=lambda run: run.id)
    rows = [
        [str(r.id), r.series_id[:8], r.scenario_id, r.workload, r.target_kind, r.status,
         str(r.repeat_index), time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.started_at)),
         fmt.duration_ns(None if r.sync_skew_s is None else r.sync_skew_s * 1e9),
         r.reason or ""]
        for r in runs
    ]
    return Table(["run", "series", "scenario", "workload", "target", "status", "repeat",
                  "started (UTC)", "sync skew", "reason"], rows)


def comparison_table(comparisons: Sequence[Comparison]) -> Table:
    rows = []
    for comparison in comparisons:
        for check in comparison.checks:
            low, high = check.ci_pct if check.ci_pct is not None else (None, None)
            rows.append([
                comparison.title, check.metric, fmt.ratio(check.ratio),
                fmt.signed_percent(check.difference_pct), fmt.percent_interval(low, high),
                "-" if check.mdd_pct is None else f"{check.mdd_pct:.2f}%",
                check.band.describe(), check.verdict, check.reason,
            ])
    return Table(["comparison", "metric", "ratio", "difference", "95% CI", "MDD",
                  "allowed", "verdict", "why"], rows)


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
    headers = ["field", *(f"{d.scenario_id} {_short_workload(d)} "
                          f"{d.target_kind} (run {d.runs[0].id})" for d in series)]
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


@dataclass(frozen=True)
class Judged:
    """A comparison with the series it judged, where they are known."""

    comparison: Comparison
    candidate: SeriesData | None = None
    reference: SeriesData | None = None


def automatic_judgements(series: Sequence[SeriesData], tolerance: float,
                         store: ResultStore) -> list[Judged]:
    """The latest inference series of each scenario, workload and target, each judged as
    `vgpu bench` judged it (vgpu.results.verdict.judge.judge_stored_all: the reference its run
    stored, that kind, those tolerances, in the family its command judged it in);
    ``tolerance`` is the band of a series whose run stored no reference."""
    by_id = {data.series_id: data for data in series}
    latest = [data for data in _latest(series).values() if data.kind != "training"]
    judged = []
    for data, verdict in zip(latest, judge_stored_all(store, latest, tolerance), strict=True):
        if verdict.comparison is not None:
            reference = None
            if verdict.reference is not None:
                reference_id = verdict.reference.reference_series
                if reference_id not in by_id:  # an older series than the shown ones
                    by_id[reference_id] = load_series(store, reference_id)
                reference = by_id[reference_id]
            judged.append(Judged(verdict.comparison, data, reference))
    return judged


def _by_label(series: Sequence[SeriesData], label: str) -> SeriesData | None:
    found = [s for s in series if s.label == label]
    return found[-1] if found else None


def all_judgements(series: Sequence[SeriesData], given: Sequence[Comparison],
                   tolerance: float, store: ResultStore) -> list[Judged]:
    """The comparisons handed in (their series found by label) and the automatic ones,
    each pair of series once (a handed-in comparison wins)."""
    judged = [Judged(c, _by_label(series, c.candidate), _by_label(series, c.reference))
              for c in given]
    seen = {(j.comparison.candidate, j.comparison.reference) for j in judged}
    for auto in automatic_judgements(series, tolerance, store):
        key = (auto.comparison.candidate, auto.comparison.reference)
        if key not in seen:
            seen.add(key)
            judged.append(auto)
    return judged


def _headline_check(comparison: Comparison) -> Check | None:
    for check in comparison.checks:
        if check.metric in (SYSTEM_THROUGHPUT, TRAINING_THROUGHPUT, PROBE_HEADLINE):
            return check
    return comparison.checks[0] if comparison.checks else None


def _ratio_band(band: Band) -> tuple[float | None, float | None]:
    return (None if band.lower_pct is None else 1 + band.lower_pct / 100,
            None if band.upper_pct is None else 1 + band.upper_pct / 100)


def _ratio_ci(check: Check) -> tuple[float, float] | None:
    if check.ci_pct is None:
        return None
    return 1 + check.ci_pct[0] / 100, 1 + check.ci_pct[1] / 100


def _band_text(band: Band) -> str:
    low, high = _ratio_band(band)
    if low is not None and high is not None:
        return f"{fmt.ratio(low)} to {fmt.ratio(high)}"
    if low is not None:
        return f">= {fmt.ratio(low)}"
    return "any" if high is None else f"<= {fmt.ratio(high)}"


def _why(comparison: Comparison) -> str:
    """One sentence: what decided the verdict, or what would; each check's full reason
    is in the table of every check."""
    return decided_by(comparison)


def _headline_value(value: float, unit: str) -> str:
    """A headline in the samples/s columns; another unit (a probe's GB/s) is written out."""
    return fmt.number(value) if unit == "samples/s" else fmt.quantity(value, unit)


def _verdict_row(judged: Judged) -> list[str]:
    comparison, candidate, reference = judged.comparison, judged.candidate, judged.reference
    check = _headline_check(comparison)
    ci = _ratio_ci(check) if check is not None else None
    return [
        candidate.scenario_id if candidate else comparison.candidate,
        _short_workload(candidate) if candidate else "-",
        candidate.target_kind if candidate else "-",
        f"{reference.scenario_id} {reference.target_kind}" if reference
        else comparison.reference,
        _headline_value(check.candidate.mean, check.unit) if check else "-",
        _headline_value(check.reference_mean, check.unit) if check else "-",
        fmt.ratio(check.ratio) if check else "-",
        fmt.ratio_interval(*ci) if ci else "-",
        _band_text(check.band) if check else "-",
        comparison.verdict, _why(comparison),
    ]


def _unjudged_row(data: SeriesData) -> list[str]:
    baseline = _baseline_scenario(data)
    run = f"run `vgpu bench --scenario {baseline}`" if baseline else \
        "name a bare-metal baseline scenario in the scenario file"
    return [data.scenario_id, _short_workload(data), data.target_kind,
            "no bare-metal run stored", "-", "-", "-", "-", "-", NO_VERDICT,
            f"nothing to judge against: {run} with the same workload"]


def _unjudged(series: Sequence[SeriesData], judged: Sequence[Judged]) -> list[SeriesData]:
    """Latest VM series (and stand-ins of a VM scenario) with no comparison."""
    compared = {j.candidate.series_id for j in judged if j.candidate is not None}
    return [data for data in _latest(series).values()
            if data.kind != "training" and data.series_id not in compared
            and (data.target_kind == "vm"
                 or (data.target_kind == "local" and _baseline_scenario(data)))]


def verdict_table(series: Sequence[SeriesData], judged: Sequence[Judged]) -> Table:
    """Scenario x workload: throughput ratio to the reference, its 95% CI, the band it
    must stay in, the verdict; a VM series with no bare-metal run says so in words."""
    rows = [_verdict_row(j) for j in judged] + [_unjudged_row(d)
                                                for d in _unjudged(series, judged)]
    return Table(["scenario", "workload", "target", "reference", "samples/s",
                  "reference samples/s", "ratio", "95% CI of ratio", "tolerance band",
                  "verdict", "why"], rows, html_id="verdict")


def _ratio_points(judged: Sequence[Judged]) -> list[RatioPointArgs]:
    points = []
    for j in judged:
        check = _headline_check(j.comparison)
        if check is None:
            continue
        label = (f"s{j.candidate.scenario_id} {_short_workload(j.candidate)}"
                 if j.candidate else j.comparison.title)
        points.append((label, check.ratio, _ratio_ci(check), _ratio_band(check.band),
                       j.comparison.verdict))
    return points


def verdict_sections(series: Sequence[SeriesData],
                     judged: Sequence[Judged]) -> list[tuple[str, Section]]:
    from vgpu.results.views import plots

    table = verdict_table(series, judged)
    if not table.rows:
        return [("Verdict: VM vs bare metal", Note(
            "No verdict: no VM series and no bare-metal series of the same workload are "
            "stored. Run the VM scenario and its bare-metal twin (`vgpu bench --scenario "
            "6` runs bm6 first) to be judged."))]
    sections: list[tuple[str, Section]] = [("Verdict: VM vs bare metal", table)]
    points = [plots.RatioPoint(*p) for p in _ratio_points(judged)]
    if points:
        sections.append(("Verdict figure: throughput ratio, 95% CI and tolerance band",
                         Chart("verdict_ratios.png", plots.verdict_ratios(points))))
    else:
        sections.append(("Verdict figure", Note(
            "Nothing to draw: no series has a bare-metal run of the same workload, so "
            "there is no ratio (the table above says what to run).")))
    return sections


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text).strip("_")


def workload_sections(inference: Sequence[SeriesData]) -> list[tuple[str, Section]]:
    """One chart per workload (ResNet50 and BERT differ tenfold: never one axis), its
    latest series; a workload with no bare-metal series says so."""
    from vgpu.results.views import plots

    groups: dict[str, list[SeriesData]] = defaultdict(list)
    for data in inference:
        groups[data.workload].append(data)
    sections: list[tuple[str, Section]] = []
    for workload, members in groups.items():
        recent = members[-INSTANCE_TABLE_SERIES:]
        name = _short_workload(members[0])
        sections.append((f"Workload {workload}", Chart(
            f"workload_{_slug(name)}_{recent[0].runs[0].id}.png",
            plots.workload_panel(recent))))
        if not any(d.target_kind == "bare-metal" for d in members):
            sections.append((f"{name}: no bare-metal run", Note(
                f"No bare-metal series of {name} is stored: its figures stand alone, with "
                "no VM vs bare-metal ratio.")))
    return sections


def _series_telemetry(data: SeriesData) -> list[telemetry_view.InstanceTelemetry]:
    return [telemetry_view.instance_telemetry(run.id, inst.result)
            for run in data.runs for inst in data.instances[run.id]]


def token_sections(series: Sequence[SeriesData]) -> list[tuple[str, Section]]:
    """The TTFT / TPOT panel of every LLM series (model llm), and the capacity panel of
    those measured as capacity at the SLO."""
    sections: list[tuple[str, Section]] = []
    for data in series:
        rows = token_rows(data)
        if rows:
            sections.append((f"Tokens: TTFT / TPOT and output tokens/s: {data.label}",
                             Table(list(token_view.HEADERS), rows, html_id="tokens")))
        capacity = capacity_rows(data)
        if capacity:
            sections.append((f"Capacity at the latency SLO: {data.label}",
                             Table(list(capacity_view.HEADERS), capacity,
                                   html_id="capacity")))
    return sections


def telemetry_table(series: Sequence[SeriesData]) -> Table:
    """Per series and instance, mean / max over the repeats of what the harness sampled."""
    headers: list[str] = []
    rows: list[list[str]] = []
    for data in series:
        readings = telemetry_view.per_instance(_series_telemetry(data))
        headers, instance_rows = telemetry_view.table_rows(readings)
        label = f"{data.scenario_id} {_short_workload(data)} {data.target_kind}"
        rows += [[label, *row] for row in instance_rows]
    return Table(["series", *headers], rows, html_id="telemetry")


def telemetry_sections(series: Sequence[SeriesData]) -> list[tuple[str, Section]]:
    """The telemetry table, then per series the last repeat's samples over time."""
    from vgpu.results.views import plots

    table = telemetry_table(series)
    if not table.rows:
        return []
    sections: list[tuple[str, Section]] = [
        ("Telemetry per instance (mean / max over the timed runs)", table)]
    for data in series:
        last = data.runs[-1]
        items = [telemetry_view.instance_telemetry(last.id, inst.result)
                 for inst in data.instances[last.id]]
        if any(item.recorded for item in items):
            title = (f"scenario {data.scenario_id} {_short_workload(data)} "
                     f"{data.target_kind}, run {last.id}")
            sections.append((f"Telemetry over time: {title}", Chart(
                f"telemetry_run{last.id}.png", plots.telemetry_over_time(items, title))))
    return sections


def validity_table(store: ResultStore, series: Sequence[SeriesData]) -> Table:
    """LoadGen's verdict on every run and instance of the series, with its reasons; a
    run that stored no instance shows its own status and reason."""
    rows = []
    for data in series:
        for run in store.runs(series_id=data.series_id):
            where = [str(run.id), str(run.repeat_index), run.scenario_id,
                     _short_workload(run), run.target_kind]
            instances = store.instances(run.id)
            if not instances:
                rows.append([*where, "-", "-", f"run {run.status}: {run.reason or ''}"])
            for stored in instances:
                inst = stored.result
                reasons = "; ".join(inst.validity_reasons) or (
                    "" if inst.status == "ok" else f"instance {inst.status}")
                rows.append([*where, inst.name, inst.validity or "-", reasons])
    return Table(["run", "repeat", "scenario", "workload", "target", "instance", "LoadGen",
                  "reasons"], rows, html_id="validity")


def scenario_gain_table(series: Sequence[SeriesData]) -> Table:
    """System throughput of each scenario relative to its gain reference
    (vgpu.results.verdict.referee.gain_reference: scenario 1, one VM with the whole GPU in lab
    study A), same workload and target kind: the study's headline numbers."""
    latest = _latest(series)
    rows = []
    for (scenario, workload, target), data in sorted(latest.items()):
        reference = gain_reference(data, latest)
        if reference is None:
            continue
        if SYSTEM_THROUGHPUT not in data.samples or SYSTEM_THROUGHPUT not in reference.samples:
            continue
        check = compare_samples(SYSTEM_THROUGHPUT, data.samples[SYSTEM_THROUGHPUT].values,
                                reference.samples[SYSTEM_THROUGHPUT].values, Band())
        low, high = check.ci_pct if check.ci_pct is not None else (None, None)
        rows.append([scenario, workload, target, fmt.number(check.candidate.mean),
                     fmt.number(check.reference_mean), fmt.signed_percent(check.difference_pct),
                     fmt.percent_interval(low, high)])
    return Table(["scenario", "workload", "target", "samples/s",
                  f"scenario {GAIN_REFERENCE_SCENARIO} samples/s", "gain", "95% CI"], rows)


def _training_points(series: Sequence[SeriesData]) -> dict[str, list[tuple[float, float]]]:
    points: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for data in series:
        if TRAINING_THROUGHPUT in data.samples and TRAINING_WORKERS in data.samples:
            workers = data.samples[TRAINING_WORKERS].values[0]
            throughput = summarize(data.samples[TRAINING_THROUGHPUT].values).mean
            points[data.workload].append((workers, throughput))
    return {k: v for k, v in points.items() if len(v) >= 2}


def split_sections(store: ResultStore,
                   series: Sequence[SeriesData]) -> list[tuple[str, Section]]:
    """A small table per Triton series: the server-side time per request by instance."""
    sections: list[tuple[str, Section]] = []
    for data in series:
        split = series_split(store, data)
        if split:
            headers, rows = split_rows(split)
            sections.append((f"Triton server-side time per request (mean over repeats): "
                             f"{data.label}", Table(headers, rows)))
    return sections


def runtime_size_table(probes: Sequence[RuntimeProbe]) -> Table:
    """Allreduce by message size, a busbw and a time column per runtime's probe."""
    from vgpu.results.views.allreduce_view import message_sizes, size_label

    headers = ["message size"]
    for probe in probes:
        headers += [f"{probe.backend} busbw GB/s", f"{probe.backend} time µs"]
    rows = []
    for size in message_sizes(probes):
        label = size_label(size)
        row = [label]
        for probe in probes:
            measured = label in probe.time_us
            row += [fmt.number(probe.busbw.get(label)) if measured else "-",
                    fmt.number(probe.time_us[label]) if measured else "-"]
        rows.append(row)
    return Table(headers, rows, html_id="runtimes")


def runtime_probe_table(probes: Sequence[RuntimeProbe]) -> Table:
    rows = [[str(p.run_id), p.backend, str(p.world_size), str(p.nodes), p.link,
             fmt.number(p.peak_busbw),
             "-" if p.link_share is None else f"{p.link_share * 100:.1f}%"]
            for p in probes]
    return Table(["run", "runtime", "ranks", "nodes", "link", "peak busbw GB/s",
                  "peak busbw / link"], rows)


def runtime_sections(store: ResultStore) -> list[tuple[str, Section]]:
    """Per scenario probed with more than one runtime (Gloo, NCCL, MPI), the newest probe
    of each side by side: the `vgpu train runtimes` data as tables and one chart."""
    from vgpu.results.views import plots
    from vgpu.results.views.allreduce_view import message_sizes, runtimes_by_scenario, size_label

    sections: list[tuple[str, Section]] = []
    for scenario, probes in runtimes_by_scenario(store).items():
        where = f"scenario {scenario} {probes[-1].target_kind}".rstrip()
        lines = [plots.RuntimeLine(
            f"{p.backend} #{p.run_id}",
            [(size, p.busbw.get(size_label(size)), p.time_us[size_label(size)])
             for size in message_sizes([p]) if size_label(size) in p.time_us])
            for p in probes]
        sections += [
            (f"Communication runtimes: allreduce by message size, {where}",
             runtime_size_table(probes)),
            (f"Communication runtimes: probes and links, {where}",
             runtime_probe_table(probes)),
            (f"Communication runtimes figure: {where}",
             Chart(f"runtimes_{_slug(scenario)}.png",
                   plots.runtime_allreduce(lines, f"Allreduce per runtime, {where}"))),
        ]
    return sections


def _platform_sections(series: Sequence[SeriesData],
                       judged: Sequence[Judged]) -> list[tuple[str, Section]]:
    sections: list[tuple[str, Section]] = []
    if series:
        sections.append(("Platform of the latest series",
                         platform_table(series[-INSTANCE_TABLE_SERIES:])))
    comparisons = [j.comparison for j in judged]
    changes = platform_change_table(comparisons)
    if changes.rows:
        sections.append(("Platform differences of the compared series", changes))
    elif comparisons:
        sections.append(("Platform differences of the compared series", Note(
            "The compared series recorded the same platform in every field.")))
    return sections


def _appendix(store: ResultStore, series: Sequence[SeriesData],
              inference: Sequence[SeriesData], history: bool) -> list[tuple[str, Section]]:
    from vgpu.results.views import plots

    sections: list[tuple[str, Section]] = []
    gains = scenario_gain_table(series)
    if gains.rows:
        sections.append((f"System throughput relative to scenario "
                         f"{GAIN_REFERENCE_SCENARIO}", gains))
    training = _training_points(series)
    if training:
        sections.append(("Training speedup vs ideal",
                         Chart("training_speedup.png", plots.training_speedup(training))))
    sections.append(("Statistics per series (95% CI, MDD at alpha 0.05, power 0.8)",
                     series_table(series)))
    if inference:
        recent = inference[-INSTANCE_TABLE_SERIES:]
        sections.append((f"Instances of the latest {len(recent)} series",
                         instance_table(recent)))
        sections += split_sections(store, recent)
    sections.append(("All runs", runs_table(store)) if history
                    else ("Runs of the series shown", runs_table(store, series)))
    return sections


def build_report(
    store: ResultStore,
    comparisons: Sequence[Comparison] = (),
    tolerance: float = 0.02,
    title: str = "vgpu benchmark report",
    history: bool = False,
) -> Report:
    """The report of the latest series of each scenario, workload and target, the
    references they were judged against and their runs (every stored series with
    ``history``): what it costs follows what it shows, not the store's history."""
    if history:
        series = all_series(store)
        held = len(series)
    else:
        series, held = latest_series(store, per_workload=INSTANCE_TABLE_SERIES)
    report = Report(title=title, generated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    judged = all_judgements(series, comparisons, tolerance, store)
    series = _with_references(series, judged)
    inference = [s for s in series if s.per_instance_throughput]
    recent = inference[-INSTANCE_TABLE_SERIES:]
    sections = report.sections
    sections += verdict_sections(series, judged)
    if judged:
        sections.append(("Every check of the compared series",
                         comparison_table([j.comparison for j in judged])))
    sections += workload_sections(inference)
    # a capacity search stores no samples/s: its series count here too
    measured = [s for s in series if s.per_instance_throughput or capacity_rows(s)]
    sections += token_sections(measured[-INSTANCE_TABLE_SERIES:])
    sections += runtime_sections(store)
    sections += _platform_sections(series, judged)
    sections += telemetry_sections(recent)
    if recent:
        sections.append(("LoadGen validity per run and instance",
                         validity_table(store, recent)))
    sections += _appendix(store, series, inference, history)
    if held > len(series):
        sections.append(("Older series", Note(
            f"The store holds {held} series; this report shows {len(series)}: the latest "
            f"of each scenario, workload and target, the references they were judged "
            f"against and the latest {INSTANCE_TABLE_SERIES} of each workload. "
            "`vgpu report --history` shows every series, `vgpu results` lists them.")))
    return report


def _with_references(series: Sequence[SeriesData],
                     judged: Sequence[Judged]) -> list[SeriesData]:
    """The series shown and the references their verdicts used, in order of first run."""
    by_id = {data.series_id: data for data in series}
    for j in judged:
        for data in (j.candidate, j.reference):
            if data is not None:
                by_id.setdefault(data.series_id, data)
    return sorted(by_id.values(), key=lambda data: data.runs[0].id)


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
