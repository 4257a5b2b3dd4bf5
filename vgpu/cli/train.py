"""`vgpu train run|scaling|probe`: training workloads of a scenario, the weak-scaling report
from stored runs, and the allreduce bandwidth probe."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vgpu.cli.common import console, scenario_from_args, site_of
from vgpu.cli.options import DbOpt, JsonOpt, ScenarioFile, ScenarioRef, inventory_option
from vgpu.cli.root import app
from vgpu.defaults import DEFAULT_DB
from vgpu.errors import InputError, RemoteError

if TYPE_CHECKING:
    from rich.table import Table

    from vgpu.train.probe import ProbeRun, ProbeSettings

train_app = typer.Typer(help="Multinode training benchmarks (PyTorch DDP under torchrun).",
                        no_args_is_help=True)
app.add_typer(train_app, name="train")


@train_app.command("run")
def run_command(
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    runs: Annotated[int | None, typer.Option("--runs", help="repeats (default: the "
                                             "scenario's)")] = None,
    inventory: Annotated[Path | None, inventory_option(
        "run on the scenario's VMs / bare-metal hosts of this inventory, one torchrun node "
        "each; none found: this machine", without="running on this machine")] = None,
    full_models: Annotated[bool, typer.Option(
        "--full-models", help="on a CPU, keep the scenario's model, image size and batch "
        "instead of the small functional check")] = False,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Run a scenario's training workloads (on this machine: nodes x GPUs as ranks of one
    torchrun), store every repeat and judge against the scenario's baseline."""
    sc = scenario_from_args(file, scenario)

    from vgpu.cli.train_view import train_and_report

    if runs is not None and runs < 1:
        raise InputError.single("command line", "--runs", f"must be >= 1, got {runs}",
                                fix="give --runs 1 or more")
    train_and_report(sc, site_of(inventory), runs, full_models, db)


@train_app.command("scaling")
def scaling_command(
    scenario: Annotated[list[str], typer.Option(
        "--scenario", "-s", help="scenario ids that differ only in node count (repeat; "
        "one must have 1 node)")],
    bare_metal: Annotated[list[str] | None, typer.Option(
        "--bare-metal", "-b", help="bare-metal counterparts (repeat)")] = None,
    tolerance_pct: Annotated[float, typer.Option(
        "--tolerance-pct", min=0.0, help="allowed VM throughput loss vs bare metal")] = 2.0,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Speedup and scaling efficiency from stored runs (and VM vs bare metal per node
    count); the values are stored back on the runs as metrics."""
    from vgpu.results.store.result_store import ResultStore
    from vgpu.train.report import build_scaling_report, render_scaling_report, store_scaling_report

    with ResultStore.open_existing(db, first="vgpu train run") as store:
        try:
            report = build_scaling_report(store, scenario, bare_metal or (),
                                          tolerance_pct / 100.0)
        except ValueError as exc:
            raise InputError.single("command line", "--scenario", str(exc),
                                    fix="include the 1-node scenario") from exc
        store_scaling_report(store, report)
    typer.echo(render_scaling_report(report))


@train_app.command("probe")
def probe_command(
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    inventory: Annotated[Path | None, inventory_option(
        "probe across the scenario's VMs / bare-metal hosts of this inventory (one node "
        "each); none found: ranks on this machine", without="probing this machine")] = None,
    ranks: Annotated[int, typer.Option("--ranks", help="ranks on this machine (without "
                                       "an inventory)")] = 2,
    size: Annotated[list[int] | None, typer.Option(
        "--size", help="message size in bytes (repeat; default 1 MiB .. 64 MiB)")] = None,
    iterations: Annotated[int, typer.Option("--iterations", min=1)] = 20,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="probes stored as one "
                                         "series (2 or more for a verdict in compare)")] = 1,
    db: DbOpt = DEFAULT_DB,
    as_json: JsonOpt = False,
) -> None:
    """Allreduce algbw/busbw over message sizes (as nccl-tests reports them) across the
    scenario's nodes, stored with the scenario's network in the platform record; without a
    scenario, on this machine only (not stored)."""
    from vgpu.train.probe import ProbeSettings, with_sizes
    from vgpu.train.probe_session import probe_and_store

    if ranks < 2:
        raise InputError.single("command line", "--ranks", f"must be >= 2, got {ranks}",
                                fix="give --ranks 2 or more")
    settings = with_sizes(ProbeSettings(iterations=iterations, local_ranks=ranks), size)
    if file is None and scenario is None:
        runs = [_local_probe(settings)]
        link = "this machine"
    else:
        sc = scenario_from_args(file, scenario)
        runs = probe_and_store(sc, site_of(inventory), db, settings, repeats)
        link = runs[0].link
    if as_json:
        typer.echo(json.dumps([run.record for run in runs] if len(runs) > 1
                              else runs[0].record, indent=2))
        return
    for run in runs:
        console.print(probe_table(run.record, link, run.run_id))


def _local_probe(settings: ProbeSettings) -> ProbeRun:
    """The probe on this machine alone (no scenario: nothing to store it under)."""
    from loadgen.contract import AllreduceRunSpec
    from vgpu.train.launch import Launch, run_launch
    from vgpu.train.probe import ProbeRun
    from vgpu.train.scenario_runner import local_node

    with tempfile.TemporaryDirectory(prefix="vgpu-probe-") as work:
        node = local_node(Path(work) / "node", python=sys.executable)
        spec = AllreduceRunSpec(sizes_bytes=settings.sizes_bytes,
                                iterations=settings.iterations,
                                device="gpu" if node.gpus >= settings.local_ranks else "cpu")
        outcome = run_launch(Launch([node], settings.local_ranks, "allreduce",
                                    spec.to_json()), Path(work) / "out")
    if outcome.record.get("status") != "ok":
        raise RemoteError(f"allreduce probe failed: {outcome.record.get('reason')}")
    return ProbeRun(outcome.record, "this machine", None, "")


def probe_table(record: dict[str, Any], link: str, run_id: int | None) -> Table:
    from vgpu.results.views.allreduce_view import size_label

    stored = "" if run_id is None else f", stored as run {run_id}"
    return bandwidth_table(
        f"allreduce, {record['world_size']} ranks on {record.get('nodes', 1)} node(s), "
        f"{record['backend']}, link {link}{stored}", record["rows"], ("size", "size B"),
        lambda row: [size_label(row["size_bytes"]), str(row["size_bytes"])],
        "n/a (one rank)")


def bandwidth_table(title: str, rows: list[dict[str, Any]], leading: tuple[str, ...],
                    leading_cells: Callable[[dict[str, Any]], list[str]],
                    no_busbw: str) -> Table:
    """A probe's rows: the ``leading`` columns, then time and algorithm/bus bandwidth."""
    from rich.table import Table

    table = Table(title=title)
    for column in (*leading, "time us", "algbw GB/s", "busbw GB/s"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*leading_cells(row), f"{row['time_us']:.1f}",
                      f"{row['algbw_gb_s']:.4f}", no_busbw if row["busbw_gb_s"] is None
                      else f"{row['busbw_gb_s']:.4f}")
    return table
