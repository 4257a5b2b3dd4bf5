"""`vgpu train mpi-probe|runtimes`: the MPI probe (OSU-style, through mpirun) and the
communication runtimes' allreduce side by side from stored probes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vgpu.cli.common import console, scenario_from_args, site_of
from vgpu.cli.options import DbOpt, JsonOpt, ScenarioFile, ScenarioRef, inventory_option
from vgpu.cli.train import bandwidth_table, train_app
from vgpu.defaults import DEFAULT_DB
from vgpu.errors import InputError

if TYPE_CHECKING:
    from rich.table import Table


@train_app.command("mpi-probe")
def mpi_probe_command(
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    inventory: Annotated[Path | None, inventory_option(
        "probe across the scenario's VMs / bare-metal hosts of this inventory (mpirun on "
        "the first, one rank each); none found: ranks on this machine",
        without="probing this machine")] = None,
    ranks: Annotated[int, typer.Option("--ranks", help="ranks on this machine (without "
                                       "an inventory)")] = 2,
    max_size: Annotated[int, typer.Option("--max-size", min=1, help="largest message in "
                                          "bytes (OSU's sizes 1 B .. 64 MiB up to it)")]
    = 64 << 20,
    iterations: Annotated[int, typer.Option("--iterations", min=1, help="per size up to "
                                            "8 KiB (a tenth, at least 1, above)")] = 100,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="probes stored as one "
                                         "series (2 or more for a verdict in compare)")] = 1,
    db: DbOpt = DEFAULT_DB,
    as_json: JsonOpt = False,
) -> None:
    """MPI point-to-point latency and bandwidth and allreduce / allgather / broadcast
    latency and busbw by message size (OSU-style, mpi4py under mpirun) across the
    scenario's nodes, stored like `vgpu train probe` (kind allreduce, backend mpi)."""
    from vgpu.train.mpi_probe import MpiProbeSettings, sizes_up_to
    from vgpu.train.mpi_probe_session import mpi_probe_and_store

    if ranks < 2:
        raise InputError.single("command line", "--ranks", f"must be >= 2, got {ranks}",
                                fix="give --ranks 2 or more")
    settings = MpiProbeSettings(sizes_bytes=sizes_up_to(max_size), iterations=iterations,
                                large_iterations=max(1, iterations // 10), local_ranks=ranks)
    sc = scenario_from_args(file, scenario)
    probed = mpi_probe_and_store(sc, site_of(inventory), db, settings, repeats)
    runs = probed.runs
    if as_json:
        typer.echo(json.dumps([run.record for run in runs] if len(runs) > 1
                              else runs[0].record, indent=2))
        return
    for run in runs:
        console.print(mpi_probe_table(run.record, run.link, run.run_id))
    if probed.comparison is None:
        console.print(f"no verdict ({probed.baseline_note})")
    else:
        reasons = "; ".join(c.reason for c in probed.comparison.checks)
        console.print(f"against {probed.baseline_note}: "
                      f"[bold]{probed.comparison.verdict}[/bold] ({reasons})")


@train_app.command("runtimes")
def runtimes_command(
    run_ids: Annotated[list[int] | None, typer.Argument(help="stored probe runs (default: "
                                                      "the newest of each runtime)")] = None,
    scenario: Annotated[str | None, typer.Option("--scenario", "-s", help="the newest "
                                                 "probe of each runtime of this scenario")]
    = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Allreduce busbw and time by message size, the stored probes of MPI, Gloo and NCCL
    side by side, with the link each crossed and the peak busbw's share of it."""
    from vgpu.results.store.result_store import ResultStore
    from vgpu.results.views.allreduce_view import latest_per_runtime, load_probe, render_runtimes

    if not run_ids and scenario is None:
        raise InputError.single("command line", "RUN_ID", "give probe run ids or --scenario",
                                fix="e.g. vgpu train runtimes -s train_multinode_2")
    with ResultStore.open(db) as store:
        ids = run_ids or latest_per_runtime(store, scenario or "")
        typer.echo(render_runtimes([load_probe(store, run_id) for run_id in ids]))


def mpi_probe_table(record: dict[str, Any], link: str, run_id: int | None) -> Table:
    from vgpu.results.views.allreduce_view import size_label

    stored = "" if run_id is None else f", stored as run {run_id}"
    return bandwidth_table(
        f"MPI probe, {record['world_size']} ranks on {record['nodes']} node(s), "
        f"{record['mpi_library']}, link {link}{stored}", record["rows"], ("op", "size"),
        lambda row: [row["op"], size_label(row["size_bytes"])], "-")
