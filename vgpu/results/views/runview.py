"""`vgpu results --run N`: one stored run read back into the terminal, without the HTML
report: its instances with LoadGen's validity (and reasons), latency percentiles,
throughput, what the harness sampled (telemetry) and the platform record."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from vgpu.errors import InputError
from vgpu.results.store.records import PLATFORM_COMPARED, Platform, Run, StoredInstance
from vgpu.results.store.result_store import ResultStore
from vgpu.results.verdict.platforms import FIELD_LABELS
from vgpu.results.views import format as fmt
from vgpu.results.views import telemetry_view

SHOWN_PERCENTILES = (("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p99_9", "p99.9"))
_VALIDITY_STYLE = {"VALID": "green", "INVALID": "bold red"}


def _when(unix: float | None) -> str:
    return "-" if unix is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix))


def run_header(run: Run) -> list[str]:
    """The lines above the tables: what ran, when, and how it ended."""
    status = run.status if not run.reason else f"{run.status}: {run.reason}"
    took = "-" if run.ended_at is None else fmt.quantity(run.ended_at - run.started_at, "s")
    skew = "-" if run.sync_skew_s is None else fmt.duration_ns(run.sync_skew_s * 1e9)
    return [
        f"run {run.id}: scenario {run.scenario_id} {run.scenario_name}, {run.workload}",
        f"target {run.target_kind}, repeat {run.repeat_index}, series {run.series_id[:8]}, "
        f"status {status}",
        f"started {_when(run.started_at)}, took {took}, synchronised start skew {skew}",
    ]


def _device(stored: StoredInstance) -> str:
    inst = stored.result
    device = inst.mig_profile or inst.device_name or inst.device_kind or "-"
    return f"{device} ({inst.device_note})" if inst.device_note else device


def instance_table(instances: Sequence[StoredInstance]) -> Table:
    table = Table(title="instances", title_justify="left")
    for column in ("instance", "device", "status", "LoadGen", "samples/s",
                   *(label for _key, label in SHOWN_PERCENTILES)):
        table.add_column(column, justify="left" if column in ("instance", "device") else "right")
    for stored in instances:
        inst = stored.result
        validity = inst.validity or "-"
        style = _VALIDITY_STYLE.get(validity)
        table.add_row(
            escape(inst.name), escape(_device(stored)), inst.status,
            f"[{style}]{validity}[/]" if style else validity, fmt.number(inst.throughput),
            *(fmt.duration_ns(inst.latency_ns.get(key)) for key, _label in SHOWN_PERCENTILES),
        )
    return table


def validity_lines(instances: Sequence[StoredInstance]) -> list[str]:
    """LoadGen's reasons for every instance it did not find VALID."""
    lines = []
    for stored in instances:
        inst = stored.result
        if inst.validity != "VALID" and (inst.validity_reasons or inst.validity):
            reasons = "; ".join(inst.validity_reasons) or "no reason recorded"
            lines.append(f"{inst.name} {inst.validity or 'no verdict'}: {reasons}")
    return lines


def telemetry_table(run_id: int, instances: Sequence[StoredInstance]) -> Table:
    readings = telemetry_view.per_instance(
        telemetry_view.instance_telemetry(run_id, s.result) for s in instances)
    headers, rows = telemetry_view.table_rows(readings)
    table = Table(title="telemetry of the timed run", title_justify="left")
    for column in headers:
        table.add_column(escape(column), justify="left" if column == "instance" else "right")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    return table


def _shown(platform: Platform | None, name: str) -> str:
    value = None if platform is None else getattr(platform, name)
    return "-" if value is None else str(value)


def platform_table(run: Run, instances: Sequence[StoredInstance]) -> Table:
    """Field per row; one column per instance (the run's record where one has none)."""
    records = [(s.result.name, s.result.platform or run.platform) for s in instances] \
        or [("run", run.platform)]
    table = Table(title="platform", title_justify="left")
    table.add_column("field")
    for name, _platform in records:
        table.add_column(escape(name))
    for name in PLATFORM_COMPARED:
        values = [_shown(p, name) for _n, p in records]
        if any(v != "-" for v in values):
            table.add_row(FIELD_LABELS.get(name, name), *(escape(v) for v in values))
    return table


def render_run(store: ResultStore, run_id: int, console: Console) -> None:
    """Print run ``run_id`` of ``store``; an unknown id is an input error."""
    run = store.run(run_id)
    if run is None:
        raise InputError.single(str(store.path), "--run", f"no run {run_id} in this database",
                                fix="pick an id from `vgpu results`")
    instances = store.instances(run_id)
    for line in run_header(run):
        console.print(escape(line))
    if instances:
        console.print(instance_table(instances))
        for line in validity_lines(instances):
            console.print(f"[bold red]{escape(line)}[/]")
        console.print(telemetry_table(run_id, instances))
        for stored in instances:
            if stored.result.log_dir:
                console.print(f"[dim]{escape(stored.result.name)} folder:[/dim] "
                              f"{escape(stored.result.log_dir)}")
    else:
        console.print("no instance results stored for this run")
    console.print(platform_table(run, instances))
