"""`vgpu calibrate noise`: measure how much a configuration varies between series (not
only between the repeats of one), so verdicts carry the noise that lives there."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vgpu.cli import common
from vgpu.cli.common import scenario_from_args
from vgpu.cli.options import DbOpt, RunsOpt, ScenarioFile, ScenarioRef, inventory_option
from vgpu.cli.root import app
from vgpu.defaults import DEFAULT_DB
from vgpu.errors import InputError, RemoteError

if TYPE_CHECKING:
    from vgpu.bench.job import BenchRequest
    from vgpu.model.scenario import Scenario
    from vgpu.results.stats.noise import NoiseLevels
    from vgpu.results.store.result_store import ResultStore
    from vgpu.results.store.series import SeriesData

calibrate_app = typer.Typer(help="Measure the noise verdicts must carry.",
                            no_args_is_help=True)
app.add_typer(calibrate_app, name="calibrate")

SeriesOpt = Annotated[int, typer.Option(
    "--series", "-k", min=2, help="independent series to run (each a fresh session: its own "
    "probe, harness processes and minute)")]
GapOpt = Annotated[float, typer.Option(
    "--gap", min=0, help="seconds to wait between series, as a revalidation's other work "
    "would space them")]
FromRunsOpt = Annotated[str | None, typer.Option(
    "--from-runs", help="pool stored series instead of running: comma-separated run ids, "
    "one per series, all of one configuration")]


@calibrate_app.command("noise")
def calibrate_noise(
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    inventory: Annotated[Path | None, inventory_option(
        "run on the scenario's VMs / bare-metal hosts of this inventory",
        without="running on this machine")] = None,
    series: SeriesOpt = 5,
    runs: RunsOpt = None,
    workload: Annotated[str | None, typer.Option(
        "--workload", "-w", help="the workload to calibrate (default: the first inference "
        "workload)")] = None,
    duration: Annotated[float | None, typer.Option(
        "--duration", help="seconds per repeat (default: the workload's)")] = None,
    gap: GapOpt = 0.0,
    from_runs: FromRunsOpt = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Run K series of one configuration and store, for its class (target kind x GPU x
    profiles x workload x runtime), the repeat and between-series CV: every later
    comparison of that class carries them (docs/results.md)."""
    from vgpu.bench.job import BenchRequest
    from vgpu.bench.workload import BenchOverrides
    from vgpu.results.store.result_store import ResultStore
    from vgpu.results.store.series import load_series, series_of_run
    from vgpu.results.verdict.noise_store import class_key
    from vgpu.targets.runtime import RuntimeOptions

    if from_runs is not None:
        ids = _run_ids(from_runs)
        with ResultStore.open_existing(db) as store:
            members = [load_series(store, series_of_run(store, run_id)) for run_id in ids]
            levels = _calibrate(store, members, "--from-runs")
    else:
        sc = scenario_from_args(file, scenario)
        chosen = _chosen_workload(sc, workload)
        site = common.site_of(inventory)  # input errors before anything runs or is created
        request = BenchRequest(site, runs, [chosen], BenchOverrides(duration_s=duration),
                               allow_cpu=False, runtime=RuntimeOptions())
        with ResultStore.open(db) as store:
            members = _run_series(sc, request, store, series, gap)
            levels = _calibrate(store, members, "--series")
    common.console.print(f"class: {class_key(members[0])}")
    for member in members:
        values = member.samples[member.headline].values if member.headline in \
            member.samples else []
        mean = sum(values) / len(values) if values else float("nan")
        common.console.print(f"  series {member.series_id[:8]}: {len(values)} valid repeats, "
                             f"mean {mean:,.1f}")
    common.console.print(f"[bold]{levels.describe()}[/bold] (series level "
                         f"{levels.series_df:.1f} df); stored in {db}")


def _run_ids(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        ids = []
    if len(ids) < 2:
        raise InputError.single("command line", "--from-runs", f"not 2 or more run ids: "
                                f"{text!r}", fix="give e.g. --from-runs 1,13,25")
    return ids


def _calibrate(store: ResultStore, members: list[SeriesData], flag: str) -> NoiseLevels:
    from vgpu.results.verdict.noise_store import calibrate_series

    try:
        return calibrate_series(store, members)
    except ValueError as exc:
        raise InputError.single("command line", flag, str(exc), fix="give series of one "
                                "configuration, at least 2, one with 2 or more VALID "
                                "repeats") from None


def _chosen_workload(sc: Scenario, workload: str | None) -> str:
    from vgpu.model.scenario import InferenceWorkload

    labels = [w.label for w in sc.workloads if isinstance(w, InferenceWorkload)]
    chosen = workload or (labels[0] if labels else None)
    if chosen is None or chosen not in labels:
        raise InputError.single(sc.source or "scenario", "--workload",
                                f"no inference workload named '{chosen}'",
                                fix=f"use one of: {', '.join(labels) or 'none'}")
    return chosen


def _run_series(sc: Scenario, request: BenchRequest, store: ResultStore, k: int,
                gap: float) -> list[SeriesData]:
    from rich.console import Console

    from vgpu.bench.job import run_scenario
    from vgpu.bench.progress import RichListener

    listener = RichListener(Console(stderr=True))
    members = []
    for index in range(k):
        if index and gap:
            time.sleep(gap)
        common.console.print(f"[bold]series {index + 1}/{k}[/bold] of scenario {sc.id} "
                             f"{', '.join(request.workloads or [])}")
        outcome = run_scenario(sc, request, store, listener)
        if outcome.failure:
            raise RemoteError(f"series {index + 1}: {outcome.failure}")
        members += [w.series for w in outcome.workloads if w.series is not None]
    return members
