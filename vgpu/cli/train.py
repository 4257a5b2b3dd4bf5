"""`vgpu train run|scaling|probe`: training workloads of a scenario, the weak-scaling report
from stored runs, and the allreduce bandwidth probe."""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from loadgen.contract import AllreduceRunSpec
from vgpu.cli.common import console, scenario_from_args
from vgpu.cli.options import DbOpt, JsonOpt, ScenarioFile, ScenarioRef, inventory_option
from vgpu.cli.root import app
from vgpu.cli.train_view import train_and_report
from vgpu.errors import InputError, RemoteError
from vgpu.results.store import DEFAULT_DB, ResultStore
from vgpu.train.bench import local_node
from vgpu.train.launch import Launch, run_launch
from vgpu.train.report import build_scaling_report, render_scaling_report, store_scaling_report

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
    if runs is not None and runs < 1:
        raise InputError.single("command line", "--runs", f"must be >= 1, got {runs}",
                                fix="give --runs 1 or more")
    train_and_report(sc, inventory, runs, full_models, db)


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
    ranks: Annotated[int, typer.Option("--ranks", help="ranks on this machine")] = 2,
    size: Annotated[list[int] | None, typer.Option(
        "--size", help="message size in bytes (repeat)")] = None,
    iterations: Annotated[int, typer.Option("--iterations")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """Allreduce bus bandwidth over message sizes on this machine (as nccl-tests report)."""
    if ranks < 2:
        raise InputError.single("command line", "--ranks", f"must be >= 2, got {ranks}",
                                fix="give --ranks 2 or more")
    with tempfile.TemporaryDirectory(prefix="vgpu-probe-") as work:
        node = local_node(Path(work) / "node", python=sys.executable)
        spec = AllreduceRunSpec(iterations=iterations,
                                device="gpu" if node.gpus >= ranks else "cpu")
        if size:
            spec = replace(spec, sizes_bytes=tuple(size))
        outcome = run_launch(Launch([node], ranks, "allreduce", spec.to_json()),
                             Path(work) / "out")
    record = outcome.record
    if record.get("status") != "ok":
        raise RemoteError(f"allreduce probe failed: {record.get('reason')}")
    if as_json:
        typer.echo(json.dumps(record, indent=2))
        return
    table = Table(title=f"allreduce, {record['world_size']} ranks, {record['backend']}")
    for column in ("size B", "time us", "algbw GB/s", "busbw GB/s"):
        table.add_column(column, justify="right")
    for row in record["rows"]:
        table.add_row(str(row["size_bytes"]), f"{row['time_us']:.1f}",
                      f"{row['algbw_gb_s']:.3f}", f"{row['busbw_gb_s']:.3f}")
    console.print(table)
