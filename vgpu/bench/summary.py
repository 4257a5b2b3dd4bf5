"""The end-of-bench summary: a rich table per workload, and the same as JSON."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from vgpu.bench.outcome import BenchOutcome, WorkloadOutcome
from vgpu.bench.verdict import scenario_verdict
from vgpu.results.stats.intervals import Summary, summarize
from vgpu.results.store.series import SYSTEM_THROUGHPUT, TIMED_OVERLAP
from vgpu.results.verdict.accuracy import ACCURACY_REFERENCE, InstanceAccuracy, instance_accuracies
from vgpu.results.verdict.compare import Comparison, check_as_dict
from vgpu.results.verdict.platforms import describe_changes
from vgpu.results.views import capacity_view, telemetry_view, token_view
from vgpu.results.views.capacity_view import capacity_rows
from vgpu.results.views.format import number
from vgpu.results.views.server_split import split_rows
from vgpu.results.views.token_view import token_rows

_VERDICT_STYLE = {"PASS": "bold green", "FAIL": "bold red", "INCONCLUSIVE": "bold yellow"}


def _ci(summary: Summary) -> str:
    if summary.half_width is None:
        return "n=1"
    return f"±{number(summary.half_width)} ({summary.half_width / summary.mean * 100:.1f}%)" \
        if summary.mean else f"±{number(summary.half_width)}"


def _skews(outcome: WorkloadOutcome) -> list[float]:
    if outcome.series is None:
        return []
    return [r.sync_skew_s for r in outcome.series.runs if r.sync_skew_s is not None]


def _validity(outcome: WorkloadOutcome, instance: str) -> str:
    assert outcome.series is not None
    verdicts = [i.result.validity or "?" for run in outcome.series.instances.values()
                for i in run if i.result.name == instance]
    return ", ".join(f"{verdicts.count(v)}x {v}" for v in sorted(set(verdicts)))


def _lowest_accuracy(outcome: WorkloadOutcome) -> dict[str, InstanceAccuracy]:
    """Per instance, its lowest accuracy over the repeats (a missing one counts lowest)."""
    lowest: dict[str, InstanceAccuracy] = {}
    for found in instance_accuracies(outcome.series) if outcome.series else []:
        held = lowest.get(found.instance)
        if held is None or (held.value is not None and (
                found.value is None or found.value < held.value)):
            lowest[found.instance] = found
    return lowest


def _accuracy_cell(accuracy: InstanceAccuracy | None) -> str:
    if accuracy is None:
        return "-"
    if accuracy.value is None:
        return "[bold red]none[/]"
    if accuracy.passed:
        return f"{accuracy.value:.4f} [green]>= {accuracy.threshold:.4g}[/]"
    return f"[bold red]{accuracy.value:.4f} < {accuracy.threshold:.4g}[/]"


def workload_table(outcome: WorkloadOutcome) -> Table:
    table = Table(title=escape(outcome.workload.key), title_justify="left")
    accuracy = _lowest_accuracy(outcome)
    columns = ["instance", "device", "n", "mean samples/s", "95% CI", "LoadGen"]
    for column in columns + (["accuracy (lowest)"] if accuracy else []):
        table.add_column(column, justify="left" if column in ("instance", "device") else "right")
    series = outcome.series
    if series is None:
        return table
    devices = series.runs[0].workload_detail.get("instances", {})
    for name, values in series.per_instance_throughput.items():
        summary = summarize(values)
        cells = [name, devices.get(name, "-"), str(summary.n), number(summary.mean),
                 _ci(summary), _validity(outcome, name)]
        table.add_row(*cells, *([_accuracy_cell(accuracy.get(name))] if accuracy else []))
    if SYSTEM_THROUGHPUT in series.samples:
        system = summarize(series.samples[SYSTEM_THROUGHPUT].values)
        mdd = "" if system.mdd is None else f"MDD {system.mdd / system.mean * 100:.1f}%"
        table.add_row("[bold]system[/bold]", "sum over instances per repeat", str(system.n),
                      f"[bold]{number(system.mean)}[/bold]", _ci(system), mdd)
    return table


def token_table(outcome: WorkloadOutcome) -> Table | None:
    """An LLM workload's TTFT / TPOT panel; None for the other workloads."""
    rows = token_rows(outcome.series) if outcome.series is not None else []
    if not rows:
        return None
    table = Table(title=f"{escape(outcome.workload.label)}: tokens (mean over valid repeats)",
                  title_justify="left")
    for column in token_view.HEADERS:
        table.add_column(column, justify="left" if column in ("instance", "measured by")
                         else "right")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    return table


def capacity_table(outcome: WorkloadOutcome) -> Table | None:
    """An LLM workload measured as capacity at the SLO: its searches per instance (in
    place of the samples/s table, which a search does not fill); None otherwise."""
    rows = capacity_rows(outcome.series) if outcome.series is not None else []
    if not rows:
        return None
    table = Table(title=f"{escape(outcome.workload.key)}: capacity at the SLO (valid "
                  "repeats)", title_justify="left")
    for column in capacity_view.HEADERS:
        table.add_column(column, justify="left" if column == "instance" else "right")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    return table


def telemetry_table(outcome: WorkloadOutcome) -> Table | None:
    """What the harness sampled per instance, over the repeats: GPU utilisation, memory,
    power, SM clock (NVML; "not supported on a MIG slice" where NVML refuses) and the
    harness process's CPU. None when no instance recorded telemetry."""
    series = outcome.series
    if series is None:
        return None
    readings = telemetry_view.per_instance(
        telemetry_view.instance_telemetry(run.id, inst.result)
        for run in series.runs for inst in series.instances[run.id])
    if not any(r.measured for fields in readings.values() for r in fields.values()):
        return None
    headers, rows = telemetry_view.table_rows(readings)
    table = Table(title=f"{escape(outcome.workload.label)}: telemetry (mean / max)",
                  title_justify="left")
    for column in headers:
        table.add_column(escape(column), justify="left" if column == "instance" else "right")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    return table


def split_table(outcome: WorkloadOutcome) -> Table:
    """Triton's server-side time per request, mean over the repeats."""
    title = f"{escape(outcome.workload.label)}: Triton server-side time per request"
    headers, rows = split_rows(outcome.server_split)
    table = Table(title=title, title_justify="left")
    for column in headers:
        table.add_column(column, justify="left" if column == "instance" else "right")
    for row in rows:
        table.add_row(*row)
    return table


def render(outcome: BenchOutcome, console: Console, db: str, report: str | None,
           judged: bool = False) -> None:
    """The job's tables and verdicts; ``judged``: end with the verdict of the whole
    scenario and its exit code (`vgpu bench`'s last line)."""
    for note in outcome.notes:
        console.print(f"[dim]note:[/dim] {escape(note)}")
    for workload in outcome.workloads:
        for note in workload.workload.notes:
            console.print(f"[dim]note:[/dim] {escape(note)}")
        capacity = capacity_table(workload)
        if capacity is None:
            console.print(workload_table(workload))
        else:
            console.print(capacity)
        if (tokens := token_table(workload)) is not None:
            console.print(tokens)
        if (telemetry := telemetry_table(workload)) is not None:
            console.print(telemetry)
        if workload.server_split:
            console.print(split_table(workload))
        skews = _skews(workload)
        if skews:
            console.print(f"synchronised start: skew max {max(skews) * 1e3:.1f} ms over "
                          f"{len(skews)} run(s); runs {', '.join(map(str, workload.run_ids))}")
        for line in repeat_quality_lines(workload):
            console.print(escape(line))
        if workload.failure:
            console.print(f"[bold red]failed:[/bold red] {escape(workload.failure)}")
        if workload.comparison is not None:
            verdict = workload.comparison.verdict
            against = workload.baseline_note or ""
            if workload.comparison.reference == ACCURACY_REFERENCE:
                against = f"the accuracy target (no baseline: {against})"
            console.print(f"verdict vs {escape(against)}: "
                          f"[{_VERDICT_STYLE[verdict]}]{verdict}[/]")
            line = design_line(workload.comparison)
            if line:
                console.print(f"  [dim]design:[/dim] {escape(line)}")
            for check in workload.comparison.checks:
                console.print(f"  {check.metric}: {check.difference_pct:+.2f}% "
                              f"({check.verdict}) {escape(check.reason)}")
            for shortfall in workload.comparison.shortfalls:
                console.print(f"  [bold yellow]too few VALID repeats:[/] {escape(shortfall)}")
            for disturbed in workload.comparison.disturbed:
                console.print(f"  [bold yellow]not judged:[/] {escape(disturbed)}")
            for line in describe_changes(workload.comparison.platform_changes):
                console.print(f"  [dim]platform:[/dim] {escape(line)}")
        elif workload.baseline_note:
            console.print(f"[dim]no verdict:[/dim] {escape(workload.baseline_note)}")
    console.print(f"results: {db}" + (f"; report: {report}" if report else ""))
    if judged:
        job = scenario_verdict(outcome)
        style = _VERDICT_STYLE.get(job.verdict or "", "bold")
        console.print(f"[{style}]{escape(job.line())}[/] (exit {job.exit_code})")


def design_line(comparison: Comparison) -> str | None:
    """How the verdict's intervals were built: the design, the noise between series they
    carry, the minimum detectable difference and whether Holm judged a family."""
    stats = [c for c in comparison.checks if c.se_pct is not None]
    if not stats:
        return None
    headline = stats[0]
    parts = [headline.design]
    if headline.design == "interleaved":
        parts.append(f"{headline.candidate.n} blocks, drift between blocks cancels")
    elif headline.noise:
        parts.append(headline.noise)
    if headline.mdd_pct is not None:
        parts.append(f"minimum detectable difference {headline.mdd_pct:.2f}%")
    if len(stats) > 1:
        parts.append(f"{len(stats)} checks judged as one family (Holm)")
    return "; ".join(parts)


def repeat_quality_lines(outcome: WorkloadOutcome) -> list[str]:
    """The INVALID repeats left out of the statistics (with LoadGen's reasons), the
    spread of the valid ones (CV) and how much of each timed span all instances shared."""
    series = outcome.series
    if series is None:
        return []
    lines = [f"valid repeats: {series.valid_count} of {len(series.runs)} ok "
             f"({len(series.invalid_runs)} INVALID instance result(s) left out)"]
    lines += [f"  INVALID run {r.run_id} {r.instance}: {'; '.join(r.reasons) or 'no reason'}"
              for r in series.invalid_runs]
    if (cv := series.throughput_cv) is not None:
        lines.append(f"repeat CV of {series.headline}: {cv * 100:.2f}%")
    overlap = series.run_quality.get(TIMED_OVERLAP)
    if overlap:
        lines.append(f"timed overlap (all instances running): min {min(overlap):.1%} over "
                     f"{len(overlap)} run(s)")
    return lines


def repeat_quality_json(outcome: WorkloadOutcome) -> dict[str, Any]:
    series = outcome.series
    if series is None:
        return {}
    return {"valid_repeats": series.valid_count, "min_valid": series.min_valid,
            "invalid_runs": [r._asdict() for r in series.invalid_runs],
            "repeat_cv": series.throughput_cv,
            "timed_overlap": series.run_quality.get(TIMED_OVERLAP, [])}


def _accuracy_json(accuracy: InstanceAccuracy | None) -> dict[str, Any] | None:
    if accuracy is None:
        return None
    return {"metric": accuracy.metric, "lowest": accuracy.value, "threshold": accuracy.threshold,
            "target": accuracy.target, "passed": accuracy.passed,
            "labels_from": accuracy.labels_from}


def as_json(outcome: BenchOutcome, db: str, report: str | None) -> dict[str, Any]:
    workloads = []
    for w in outcome.workloads:
        stats: dict[str, Any] = {}
        instances: dict[str, Any] = {}
        accuracy = _lowest_accuracy(w)
        if w.series is not None:
            for name, sample in w.series.samples.items():
                s = summarize(sample.values)
                stats[name] = {"unit": sample.unit, "n": s.n, "mean": s.mean, "stdev": s.stdev,
                               "ci95_low": s.ci_low, "ci95_high": s.ci_high, "mdd": s.mdd,
                               "values": sample.values}
            for name, values in w.series.per_instance_throughput.items():
                s = summarize(values)
                instances[name] = {"n": s.n, "mean": s.mean, "ci95_low": s.ci_low,
                                   "ci95_high": s.ci_high, "values": values,
                                   "accuracy": _accuracy_json(accuracy.get(name))}
        workloads.append({
            "workload": w.workload.key, "detail": w.workload.detail(),
            "series_id": w.series_id, "run_ids": w.run_ids, "failure": w.failure,
            "calibrated_qps": w.calibrated_qps, "statistics": stats, "instances": instances,
            "triton_server_split_us": w.server_split,
            "sync_skew_s": _skews(w),
            **repeat_quality_json(w),
            "baseline": w.baseline_note,
            "verdict": None if w.comparison is None else w.comparison.verdict,
            "checks": [] if w.comparison is None else
            [check_as_dict(c) for c in w.comparison.checks],
        })
    return {
        "scenario": {"id": outcome.scenario.id, "name": outcome.scenario.name},
        "targets": [{"instance": t.instance, "device": t.device_label,
                     "target_kind": t.target_kind, "threads": t.threads}
                    for t in outcome.targets],
        "notes": outcome.notes, "workloads": workloads, "db": db, "report": report,
        "failure": outcome.failure,
        "scenario_verdict": scenario_verdict(outcome).as_json(),
    }
