"""`vgpu train run` and `vgpu bench` of a training scenario: the session run on the
resolved scenario, then what they print (one row per repeat, the notes of every series and
its verdict against the baseline) and the exit the outcome calls for."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from vgpu.cli.common import console
from vgpu.errors import RemoteError, VerdictFailed
from vgpu.model.scenario import Scenario
from vgpu.results.store.result_store import ResultStore
from vgpu.train.scenario_runner import TrainingRun
from vgpu.train.session import TrainingOutcome, WorkloadSeries, run_training_bench

if TYPE_CHECKING:
    from vgpu.site import Site

_COLUMNS = ("workload", "repeat", "status", "world", "images/s", "step p50 ms",
            "comm share", "params in sync")


def _row(workload: str, index: int, run: TrainingRun) -> list[str]:
    record = run.record
    if record.get("status") != "ok":
        return [workload, str(index), "failed", "-", "-", "-", "-", "-"]
    totals = record["totals"]
    share = record["communication"].get("share_mean")
    return [
        workload, str(index), "ok", str(record["world_size"]),
        f"{totals['images_per_s']:.1f}", f"{totals['step_time_s']['p50'] * 1e3:.1f}",
        "-" if share is None else f"{share * 100:.1f}%",
        "yes" if totals["params_in_sync"] else "NO",
    ]


def input_summary(record: dict[str, Any]) -> str | None:
    """A file-fed run's input in one line, ending with the bound; None for synthetic."""
    fed = record.get("input")
    if record.get("status") != "ok" or not fed:
        return None
    gpu = fed["gpu_utilisation_pct"]
    gpu_text = f"{gpu:.0f}%" if gpu is not None else f"not measured ({fed['gpu_utilisation_note']})"
    return (
        f"{record['totals']['images_per_s']:.1f} images/s from files, "
        f"input {fed['input_mb_per_s']:.1f} MB/s; workers spent {fed['read_share']:.0%} of "
        f"their time reading, {fed['decode_share']:.0%} decoding, CPU "
        f"{fed['worker_cpu_utilisation']:.0%} of {fed['workers']} worker(s); data wait "
        f"{fed['data_wait_share']:.0%} of step time; GPU utilisation {gpu_text}; page cache: "
        f"{fed['page_cache']}; bound: {fed['bound']}"
        + (f" ({fed['bound_note']})" if fed.get("bound_note") else "")
    )


def _print_inputs(series: WorkloadSeries) -> None:
    for index, run in enumerate(series.runs):
        line = input_summary(run.record)
        if line is not None:
            console.print(f"{series.workload} repeat {index}: {line}", markup=False,
                          highlight=False)


def _print_series(series: WorkloadSeries) -> None:
    for note in sorted({n for run in series.runs for n in run.notes}):
        console.print(f"note: {note}")
    if series.comparison is not None:
        reasons = "; ".join(c.reason for c in series.comparison.checks)
        console.print(f"{series.workload} against {series.baseline_note}: "
                      f"[bold]{series.comparison.verdict}[/bold] ({reasons})")
    else:
        console.print(f"{series.workload}: no verdict ({series.baseline_note})")


def render_training(outcome: TrainingOutcome, db: Path) -> None:
    table = Table(title=f"{outcome.scenario.id}: training runs stored in {db}")
    for column in _COLUMNS:
        table.add_column(column)
    for series in outcome.series:
        for index, run in enumerate(series.runs):
            table.add_row(*_row(series.workload, index, run))
    console.print(table)
    for series in outcome.series:
        _print_inputs(series)
        _print_series(series)


def exit_for_training(outcome: TrainingOutcome) -> None:
    """A failed repeat is a remote error; a FAIL verdict exits with the verdict's code."""
    failure = outcome.failure
    if failure:
        raise RemoteError(failure)
    if outcome.verdict_failed:
        raise VerdictFailed("verdict FAIL against the baseline")


def _note(text: str) -> None:
    console.print(f"note: {text}")


def train_and_report(scenario: Scenario, site: Site, runs: int | None,
                     full_models: bool, db: Path) -> None:
    with ResultStore.open(db) as store:
        outcome = run_training_bench(scenario, site, store, runs=runs,
                                     full_models=full_models, on_note=_note)
    render_training(outcome, db)
    exit_for_training(outcome)
