"""`vgpu train run` and `vgpu bench` of a training scenario: the session run on the
resolved scenario, then what they print (one row per repeat, the notes of every series and
its verdict against the baseline) and the exit the outcome calls for."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from vgpu.cli.common import console
from vgpu.errors import RemoteError, VerdictFailed
from vgpu.model.scenario import Scenario
from vgpu.results.store import ResultStore
from vgpu.train.bench import TrainingRun
from vgpu.train.session import TrainingOutcome, WorkloadSeries, run_training_bench

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


def train_and_report(scenario: Scenario, inventory: Path | None, runs: int | None,
                     full_models: bool, db: Path) -> None:
    with ResultStore.open(db) as store:
        outcome = run_training_bench(scenario, inventory, store, runs=runs,
                                     full_models=full_models, on_note=_note)
    render_training(outcome, db)
    exit_for_training(outcome)
