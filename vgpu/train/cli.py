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
from vgpu import catalog
from vgpu.cli import app
from vgpu.cli.common import console, scenario_from_args
from vgpu.errors import InputError, RemoteError, VerdictFailed
from vgpu.model import load_inventory
from vgpu.results.records import TargetKind
from vgpu.results.store import DEFAULT_DB, ResultStore
from vgpu.train.bench import Overrides, local_gpu_count, local_node
from vgpu.train.launch import Launch, TrainNode, run_launch
from vgpu.train.report import build_scaling_report, render_scaling_report, store_scaling_report
from vgpu.train.session import CPU_CHECK, run_training_series
from vgpu.train.targets import inventory_nodes

train_app = typer.Typer(help="Multinode training benchmarks (PyTorch DDP under torchrun).",
                        no_args_is_help=True)
app.add_typer(train_app, name="train")

DbOpt = Annotated[Path, typer.Option("--db", help="results database (SQLite file)")]


@train_app.command("run")
def run_command(
    file: Annotated[Path | None, typer.Argument(help="scenario YAML file",
                                                show_default=False)] = None,
    scenario: Annotated[str | None, typer.Option("--scenario", "-s",
                                                 help="catalogue scenario id")] = None,
    runs: Annotated[int | None, typer.Option("--runs", help="repeats (default: the "
                                             "scenario's)")] = None,
    inventory: Annotated[Path | None, typer.Option(
        "--inventory", "-i", help="run on the scenario's VMs / bare-metal hosts of this "
        "inventory, one torchrun node each (default: this machine)")] = None,
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
    with ResultStore.open(db) as store:
        nodes: list[TrainNode] | None = None
        target_kind: TargetKind = "local"
        if inventory is not None:
            path = catalog.resolve_inventory(inventory)
            nodes, target_kind, notes = inventory_nodes(
                sc, load_inventory(path), path, store.logs_root / "train-hosts")
            for note in notes:
                console.print(f"note: {note}")
        has_gpus = all(n.gpus for n in nodes) if nodes is not None else local_gpu_count() > 0
        over = Overrides() if full_models or has_gpus else CPU_CHECK
        try:
            all_series = run_training_series(
                sc, nodes, store.logs_root / "train" / sc.id, store, repeats=runs,
                overrides=over, target_kind=target_kind,
            )
        finally:
            for node in nodes or []:
                close = getattr(node.shell, "close", None)
                if close is not None:
                    close()
    table = Table(title=f"{sc.id}: training runs stored in {db}")
    for column in ("workload", "repeat", "status", "world", "images/s", "step p50 ms",
                   "comm share", "params in sync"):
        table.add_column(column)
    failure = None
    for series in all_series:
        for index, run in enumerate(series.runs):
            record = run.record
            if record.get("status") != "ok":
                failure = failure or f"{series.workload}: {record.get('reason')}"
                table.add_row(series.workload, str(index), "failed", "-", "-", "-", "-", "-")
                continue
            totals = record["totals"]
            share = record["communication"].get("share_mean")
            table.add_row(
                series.workload, str(index), "ok", str(record["world_size"]),
                f"{totals['images_per_s']:.1f}", f"{totals['step_time_s']['p50'] * 1e3:.1f}",
                "-" if share is None else f"{share * 100:.1f}%",
                "yes" if totals["params_in_sync"] else "NO",
            )
    console.print(table)
    for series in all_series:
        for note in sorted({n for run in series.runs for n in run.notes}):
            console.print(f"note: {note}")
        if series.check is not None:
            console.print(f"{series.workload} {series.baseline_note}: "
                          f"[bold]{series.check.verdict}[/bold] ({series.check.reason})")
        else:
            console.print(f"{series.workload}: no verdict ({series.baseline_note})")
    if failure:
        raise RemoteError(failure)
    if any(s.check is not None and s.check.verdict == "FAIL" for s in all_series):
        raise VerdictFailed("verdict FAIL against the baseline")


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
    as_json: Annotated[bool, typer.Option("--json")] = False,
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
