"""vSphere commands: preflight, apply, destroy, and the simulator lab (sim up / sim down)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from vgpu import catalog
from vgpu.cli import app, common
from vgpu.cli.common import scenario_from_args
from vgpu.errors import InputError, RemoteError
from vgpu.model.inventory import Inventory
from vgpu.model.load import load_inventory
from vgpu.model.scenario import Scenario
from vgpu.sim import state as simstate
from vgpu.sim.lab import DEFAULT_PORT, LabShape
from vgpu.vsphere.connection import connect
from vgpu.vsphere.diff import ChangeSet, Step
from vgpu.vsphere.execute import DEFAULT_CONCURRENCY, DEFAULT_IP_TIMEOUT_S, Executor, VmOutcome
from vgpu.vsphere.from_inventory import target_from_inventory
from vgpu.vsphere.preflight import run_preflight, save_report
from vgpu.vsphere.reconcile import ClusterState
from vgpu.vsphere.render import render_changes, render_outcomes, render_preflight
from vgpu.vsphere.workflow import prepare_apply, prepare_destroy

ScenarioFile = Annotated[Path | None, typer.Argument(help="scenario YAML file",
                                                     show_default=False)]
ScenarioRef = Annotated[str | None, typer.Option("--scenario", "-s",
                                                 help="catalogue scenario id, e.g. 8")]
InventoryReq = Annotated[Path, typer.Option("--inventory", "-i",
                                            help="inventory YAML (or name in inventory/)")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")]
ConcurrencyOpt = Annotated[int, typer.Option("--concurrency", min=1, max=64,
                                             help="VMs worked on at the same time")]

sim_app = typer.Typer(help="The vSphere simulator lab (govmomi vcsim shaped as a GPU lab).",
                      no_args_is_help=True)
app.add_typer(sim_app, name="sim")


def _inventory(path: Path) -> tuple[Inventory, Path]:
    if not path.exists() and (catalog.default_inventory_dir() / f"{path}.yaml").exists():
        path = catalog.default_inventory_dir() / f"{path}.yaml"
    return load_inventory(path), path


def _vsphere_scenario(file: Path | None, scenario: str | None) -> Scenario:
    sc = scenario_from_args(file, scenario)
    if sc.platform != "vsphere":
        raise InputError.single(sc.source or f"scenario {sc.id}", "platform",
                                f"scenario {sc.id} runs on {sc.platform}, not on vSphere VMs",
                                fix="use `vgpu bench` for bare-metal scenarios")
    return sc


def _confirm(question: str, yes: bool) -> bool:
    if yes:
        return True
    if not sys.stdin.isatty():
        raise InputError.single("command line", "--yes",
                                "no terminal to ask for confirmation",
                                fix="pass --yes to go ahead, or --dry-run to only look")
    return typer.confirm(question, default=False)


def _execute(state: ClusterState, changes: ChangeSet, concurrency: int,
             ip_timeout_s: float) -> list[VmOutcome]:
    console = common.console
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                  TimeElapsedColumn(), console=console, transient=not console.is_terminal,
                  ) as progress:
        rows = {c.name: progress.add_task(f"{c.name}: queued", total=len(c.steps))
                for c in changes.pending}

        def on_step(name: str, step: Step) -> None:
            progress.update(rows[name], description=f"{name}: {step.value}")

        def on_done(name: str, outcome: VmOutcome) -> None:
            status = "done" if outcome.ok else "[red]failed[/]"
            progress.update(rows[name], description=f"{name}: {status}",
                            completed=len(outcome.steps_done))

        executor = Executor(state.placement, state.hosts, concurrency=concurrency,
                            ip_timeout_s=ip_timeout_s, on_step=on_step, on_done=on_done)
        report = executor.run(changes)
    render_outcomes(report, common.console)
    return report.failed


def _fail_if_any(failed: list[VmOutcome], total: int, command: str) -> None:
    if failed:
        lines = "\n".join(f"  {o.name}: {o.error}" for o in failed)
        raise RemoteError(f"{len(failed)} of {total} VM(s) failed; the others finished:\n"
                          f"{lines}\nfix the cause and run `vgpu {command}` again: it "
                          "continues from where each VM stopped")


@app.command()
def preflight(
    inventory: InventoryReq,
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    results_dir: Annotated[Path, typer.Option(help="where the facts JSON is stored")] =
    Path("vgpu-results/preflight"),
    as_json: Annotated[bool, typer.Option("--json", help="print the facts as JSON")] = False,
) -> None:
    """Check the vCenter hosts (ESXi, GPUs, vGPU types, Shared Direct, capacity, state) and,
    with a scenario, whether it can run there. Exits non-zero when it cannot."""
    inv, inv_path = _inventory(inventory)
    sc = scenario_from_args(file, scenario) if (file or scenario) else None
    with connect(target_from_inventory(inv, inv_path)) as session:
        report = run_preflight(session, inv, inv_path, sc)
    saved = save_report(report, results_dir)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        render_preflight(report, common.console)
        common.console.print(f"facts saved to {saved}")
    if not report.ok:
        raise RemoteError("preflight failed:\n  " + "\n  ".join(report.failures()))


@app.command()
def apply(
    inventory: InventoryReq,
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    yes: YesOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show the changes and stop")] =
    False,
    concurrency: ConcurrencyOpt = DEFAULT_CONCURRENCY,
    ip_timeout: Annotated[float, typer.Option(help="seconds to wait for each guest IP")] =
    DEFAULT_IP_TIMEOUT_S,
) -> None:
    """Make vCenter match the scenario's plan: create, change or delete its VMs (only VMs
    vgpu created for this scenario), then power them on with their planned IPs."""
    sc = _vsphere_scenario(file, scenario)
    inv, inv_path = _inventory(inventory)
    with connect(target_from_inventory(inv, inv_path)) as session:
        prep = prepare_apply(session, sc, inv, inv_path)
        render_changes(prep.changes, common.console, title=f"apply scenario {sc.id} ({sc.name}), "
                                                    f"plan {prep.plan.plan_hash}")
        for note in prep.scenario_state.notes:
            common.console.print(f"[yellow]note:[/] {note}")
        if not prep.changes.pending:
            common.console.print("nothing to change: vCenter already matches the plan")
            return
        if dry_run or not _confirm(f"apply {len(prep.changes.pending)} change(s)?", yes):
            common.console.print("dry run: nothing changed" if dry_run else "nothing changed")
            return
        failed = _execute(prep.state, prep.changes, concurrency, ip_timeout)
    _fail_if_any(failed, len(prep.changes.pending), "apply")


@app.command()
def destroy(
    inventory: InventoryReq,
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    yes: YesOpt = False,
    concurrency: ConcurrencyOpt = DEFAULT_CONCURRENCY,
) -> None:
    """Power off and delete the VMs vgpu created for the scenario. VMs it did not create
    are never touched."""
    sc = _vsphere_scenario(file, scenario)
    inv, inv_path = _inventory(inventory)
    with connect(target_from_inventory(inv, inv_path)) as session:
        state, changes = prepare_destroy(session, sc.id, inv, inv_path)
        render_changes(changes, common.console, title=f"destroy scenario {sc.id} ({sc.name})")
        if not changes.pending:
            common.console.print("nothing to delete: no VM of this scenario exists")
            return
        if not _confirm(f"delete {len(changes.pending)} VM(s)?", yes):
            common.console.print("nothing changed")
            return
        failed = _execute(state, changes, concurrency, DEFAULT_IP_TIMEOUT_S)
    _fail_if_any(failed, len(changes.pending), "destroy")


@sim_app.command("up")
def sim_up(
    port: Annotated[int, typer.Option(help="port to listen on (0: any free one)")] =
    DEFAULT_PORT,
    hosts: Annotated[int, typer.Option(min=1, max=64, help="ESXi hosts in the cluster")] = 4,
    gpus: Annotated[int, typer.Option(min=0, max=16, help="A100 80GB GPUs per host")] = 4,
    no_vgpu_hosts: Annotated[int, typer.Option(min=0, help="hosts (from the end) with GPUs "
                                               "but no vGPU types")] = 0,
    no_gpu_hosts: Annotated[int, typer.Option(min=0, help="hosts (from the end) with no "
                                              "GPU")] = 0,
    tls: Annotated[bool, typer.Option("--tls/--no-tls", help="serve https")] = True,
    inventory_out: Annotated[Path, typer.Option(help="inventory file to write for the lab")] =
    Path("vgpu-sim-inventory.yaml"),
) -> None:
    """Start the simulator lab in the background and write an inventory for it."""
    if no_vgpu_hosts + no_gpu_hosts > hosts:
        raise InputError.single("command line", "--no-vgpu-hosts/--no-gpu-hosts",
                                "more special hosts than --hosts", fix="raise --hosts")
    shape = LabShape(hosts=hosts, gpus_per_host=gpus, no_vgpu_hosts=no_vgpu_hosts,
                     no_gpu_hosts=no_gpu_hosts, tls=tls, listen=f"127.0.0.1:{port}")
    lab = simstate.up(shape, inventory_out)
    common.console.print(f"[bold green]simulator lab running[/] at {lab.url} (pid {lab.pid})")
    common.console.print(f"  {hosts} ESXi {shape.esxi_version} host(s) x {gpus} A100 80GB, "
                  f"template {shape.template}, user {shape.username}")
    common.console.print(f"  inventory written to {inventory_out.resolve()}")
    common.console.print(f"  password file {lab.workdir / simstate.PASSWORD_FILE}; for "
                  f"inventory/sim.yaml: export VGPU_VCENTER_PASSWORD='{lab.password}'")
    common.console.print(f"next: vgpu preflight -i {inventory_out} --scenario 8\n"
                  f"      vgpu apply -i {inventory_out} --scenario 8\n"
                  "      vgpu sim down")


@sim_app.command("down")
def sim_down() -> None:
    """Stop the simulator lab started by `vgpu sim up` and remove its inventory file."""
    stopped = simstate.down()
    common.console.print(f"stopped the simulator lab at {stopped}" if stopped
                  else "no simulator lab was running")


@sim_app.command("status")
def sim_status() -> None:
    """Say whether a simulator lab started by `vgpu sim up` is running, and where."""
    running = simstate.status()
    if running is None:
        common.console.print("no simulator lab is running (start one with `vgpu sim up`)")
        raise typer.Exit(1)
    common.console.print(f"running at {running.url} (pid {running.pid}), inventory "
                  f"{running.inventory}")
