"""vSphere commands: preflight, apply, destroy, and the simulator lab (sim up / down /
status). Parsing only: the work is in vgpu.vsphere.commands and vgpu.sim.state, imported
when a command runs, so other commands do not pay for loading pyVmomi."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vgpu import catalog
from vgpu.cli import common
from vgpu.cli.common import scenario_from_args
from vgpu.cli.options import InventoryReq, ScenarioFile, ScenarioRef, inventory_option
from vgpu.cli.plan_view import print_warnings
from vgpu.cli.root import app
from vgpu.errors import InputError, Problem, RemoteError
from vgpu.model.inventory import Inventory
from vgpu.model.load import load_inventory
from vgpu.model.scenario import Scenario
from vgpu.plan import build_plan
from vgpu.sim.lab import DEFAULT_PORT, ESXI_BUILD, VIB_VERSION, LabShape, host_name
from vgpu.vsphere.limits import DEFAULT_CONCURRENCY, DEFAULT_IP_TIMEOUT_S

if TYPE_CHECKING:
    from vgpu.sim.state import LabRecord

InventoryOpt = Annotated[Path | None, inventory_option(
    "inventory YAML (or name in inventory/); a bare-metal scenario without one is applied on "
    "this machine", without="a bare-metal scenario is applied on this machine")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")]
ConcurrencyOpt = Annotated[int, typer.Option("--concurrency", "--parallel", min=1, max=64,
                                             help="VMs worked on at the same time")]
BreakLeaseOpt = Annotated[bool, typer.Option(
    "--break-lease", help="take the lab's lease even though another run holds it (only when "
    "that run died: two runs at once change the lab against each other)")]

sim_app = typer.Typer(help="The vSphere simulator lab (govmomi vcsim shaped as a GPU lab).",
                      no_args_is_help=True)
app.add_typer(sim_app, name="sim")


def _inventory(path: Path | None) -> tuple[Inventory, Path]:
    assert path is not None, "InventoryReq resolves or refuses"
    path = catalog.resolve_inventory(path)
    return load_inventory(path), path


def _vsphere_scenario(file: Path | None, scenario: str | None) -> Scenario:
    sc = scenario_from_args(file, scenario)
    if sc.platform != "vsphere":
        raise InputError.single(sc.source or f"scenario {sc.id}", "platform",
                                f"scenario {sc.id} runs on {sc.platform}, not on vSphere VMs",
                                fix="use `vgpu bench` for bare-metal scenarios")
    return sc


@app.command()
def preflight(
    inventory: InventoryReq = None,
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    results_dir: Annotated[Path, typer.Option(help="where the facts JSON is stored")] =
    Path("vgpu-results/preflight"),
    as_json: Annotated[bool, typer.Option("--json", help="print the facts as JSON")] = False,
    against: Annotated[str | None, typer.Option(
        help="compare with an earlier run: 'last' (the newest saved for this inventory), a "
        "run id (a saved file's name, e.g. preflight-20260301T101500Z-scenario-8) or a "
        "facts file; exits 1 when a change breaks the scenario")] = None,
) -> None:
    """Check the vCenter hosts (ESXi, host driver VIB, GPUs, vGPU types, Shared Direct,
    capacity, state) and, with a scenario, whether it can run there. Exits non-zero when it
    cannot. With --against, also shows what changed since an earlier run."""
    from vgpu.vsphere import commands

    inv, inv_path = _inventory(inventory)
    sc = scenario_from_args(file, scenario) if (file or scenario) else None
    commands.preflight(inv, inv_path, sc, results_dir, as_json, common.console,
                       against=against)


@app.command()
def apply(
    inventory: InventoryOpt = None,
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    yes: YesOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show the changes and stop")] =
    False,
    concurrency: ConcurrencyOpt = DEFAULT_CONCURRENCY,
    ip_timeout: Annotated[float, typer.Option(min=1.0, help="seconds to wait for each "
                                              "guest IP")] = DEFAULT_IP_TIMEOUT_S,
    provision: Annotated[bool, typer.Option(
        "--provision/--no-provision",
        help="provision the guests over SSH once the VMs are up (as `vgpu provision`)")] = True,
    accept_new_host_keys: Annotated[bool, typer.Option(
        "--accept-new-host-keys",
        help="when provisioning, trust the new VMs' SSH host keys and record them")] = False,
    enable_mig: Annotated[bool, typer.Option(
        "--enable-mig", help="bare metal: switch MIG mode on where it is off (needs a GPU "
        "reset, which vgpu never does itself)")] = False,
    break_lease: BreakLeaseOpt = False,
) -> None:
    """Make vCenter match the scenario's plan: create, change or delete its VMs (only VMs
    vgpu created for this scenario), power them on with their planned IPs, then provision
    their guests over SSH. A bare-metal scenario instead gets its MIG layout created on
    each bare-metal host through NVML (this machine, or over SSH)."""
    from vgpu.cli.provision import provision_scenario
    from vgpu.vsphere import commands
    from vgpu.vsphere.from_inventory import require_vcenter

    sc = scenario_from_args(file, scenario)
    if sc.platform == "bare-metal":
        _apply_bare_metal(sc, inventory, enable_mig, dry_run, accept_new_host_keys)
        return
    if inventory is None:
        raise InputError.single("command line", "--inventory",
                                f"scenario {sc.id} creates vSphere VMs and needs an inventory",
                                fix="pass --inventory FILE (try `vgpu sim up` for a lab)")
    inv, inv_path = _inventory(inventory)
    require_vcenter(inv, inv_path, sc.id)
    # Everything the whole command needs is checked before vCenter is reached: the layout
    # on empty GPUs (vCenter can only make it tighter) and provisioning's local inputs.
    print_warnings(build_plan(sc, inv, inventory_name=str(inv_path)), common.console)
    if provision:
        _check_provision_inputs(sc, inv_path, dry_run)
    commands.apply(sc, inv, inv_path, dry_run=dry_run, confirm=commands.terminal_confirm(yes),
                   concurrency=concurrency, ip_timeout_s=ip_timeout, console=common.console,
                   break_lease=break_lease)
    if not dry_run:
        _start_simulator_guests(sc, inv, inv_path)
    if provision and not dry_run:
        common.console.print("[bold]Provisioning the guests[/]")
        provision_scenario(sc, inv_path, accept_new_host_keys=accept_new_host_keys)


def _start_simulator_guests(sc: Scenario, inv: Inventory, inv_path: Path) -> None:
    """On `vgpu sim up`'s inventory: a guest (sshd) for every VM of the scenario."""
    from vgpu.sim import follow

    record = follow.lab_of(inv_path)
    if record is None:
        return
    if record.guest_network is None:
        common.console.print(f"note: simulator lab without guests (missing: "
                             f"{record.guests_missing}); the VMs have no SSH to provision "
                             "or bench on", highlight=False)
        return
    for guest in follow.start_for_apply(sc, inv, inv_path):
        common.console.print(f"simulator guest {guest.vm} at {guest.address} "
                             f"({guest.hardware}, simulated)", highlight=False)


def _check_provision_inputs(sc: Scenario, inv_path: Path, dry_run: bool) -> None:
    from vgpu.cli.provision import provision_jobs

    try:
        provision_jobs(sc, inv_path)
    except InputError as exc:
        if dry_run:
            for problem in exc.problems:
                common.console.print(f"[yellow]note:[/] provisioning would be refused: "
                                     f"{problem}", highlight=False)
            return
        raise InputError([*exc.problems, Problem(
            "command line", "--provision",
            "apply provisions the guests once the VMs are up, and the inventory lacks what "
            "that needs (above); no VM was created or changed",
            fix="complete the inventory, or pass --no-provision to create the VMs only")],
            unlisted=exc.unlisted) from None


def _apply_bare_metal(sc: Scenario, inventory: Path | None, enable_mig: bool, dry_run: bool,
                      accept_new_host_keys: bool) -> None:
    from vgpu.baremetal import apply_bare_metal

    inv, inv_path = _inventory(inventory) if inventory else (None, None)
    lines = apply_bare_metal(sc, inv, inv_path, enable_mig=enable_mig, dry_run=dry_run,
                             accept_new_host_keys=accept_new_host_keys,
                             log=lambda text: common.console.print(text, markup=False))
    for line in lines:
        common.console.print(line, markup=False, highlight=False)
    common.console.print(f"bare-metal scenario {sc.id}: MIG layout "
                         f"{'checked (dry run)' if dry_run else 'in place'}; run "
                         f"`vgpu bench --scenario {sc.id}` next")


@app.command()
def destroy(
    inventory: InventoryReq = None,
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    yes: YesOpt = False,
    concurrency: ConcurrencyOpt = DEFAULT_CONCURRENCY,
    break_lease: BreakLeaseOpt = False,
) -> None:
    """Power off and delete the VMs vgpu created for the scenario. VMs it did not create
    are never touched."""
    from vgpu.vsphere import commands

    sc = _vsphere_scenario(file, scenario)
    inv, inv_path = _inventory(inventory)
    commands.destroy(sc, inv, inv_path, confirm=commands.terminal_confirm(yes),
                     concurrency=concurrency, console=common.console,
                     break_lease=break_lease)
    from vgpu.sim import follow

    for guest in follow.stop_for_destroy(sc, inv, inv_path):
        common.console.print(f"simulator guest {guest.vm} at {guest.address} removed",
                             highlight=False)


@sim_app.command("up")
def sim_up(
    port: Annotated[int, typer.Option(help="port to listen on (0: any free one)")] =
    DEFAULT_PORT,
    hosts: Annotated[int, typer.Option(min=1, max=64, help="ESXi hosts in the cluster")] = 4,
    gpus: Annotated[int, typer.Option("--gpus", "--gpus-per-host", min=0, max=16,
                                      help="A100 80GB GPUs per host")] = 4,
    no_vgpu_hosts: Annotated[int, typer.Option(min=0, help="hosts (from the end) with GPUs "
                                               "but no vGPU types")] = 0,
    no_gpu_hosts: Annotated[int, typer.Option(min=0, help="hosts (from the end) with no "
                                              "GPU")] = 0,
    tls: Annotated[bool, typer.Option("--tls/--no-tls", help="serve https")] = True,
    esxi_build: Annotated[str, typer.Option(help="ESXi build every host reports")] =
    ESXI_BUILD,
    vib_version: Annotated[str, typer.Option(help="version of the NVIDIA host driver VIB "
                                             "every host reports")] = VIB_VERSION,
    remove_vgpu_type: Annotated[list[str] | None, typer.Option(
        help="a vGPU type no host offers (repeat it), e.g. grid_a100d-1-10c")] = None,
    maintenance: Annotated[list[int] | None, typer.Option(
        min=0, help="index of a host in maintenance mode (repeat it), e.g. 0 for DC0_C0_H0")]
    = None,
    inventory_out: Annotated[Path, typer.Option(help="inventory file to write for the lab "
                                                "(found by every command in this folder)")] =
    Path(catalog.LOCAL_INVENTORY),
) -> None:
    """Start the simulator lab in the background and write an inventory for it. As root,
    `vgpu apply` then gives every VM it creates a simulated guest (an sshd in its own
    network namespace at the VM's IP); without root only the vCenter part runs, and this
    says so first. The build, VIB, removed-type and maintenance options shape an
    "upgraded" lab for drift checks."""
    from vgpu.sim import state as simstate

    if no_vgpu_hosts + no_gpu_hosts > hosts:
        raise InputError.single("command line", "--no-vgpu-hosts/--no-gpu-hosts",
                                "more special hosts than --hosts", fix="raise --hosts")
    _check_host_indexes(maintenance or [], hosts)
    shape = LabShape(hosts=hosts, gpus_per_host=gpus, no_vgpu_hosts=no_vgpu_hosts,
                     no_gpu_hosts=no_gpu_hosts, tls=tls, listen=f"127.0.0.1:{port}",
                     esxi_build=esxi_build, vib_version=vib_version,
                     removed_vgpu_types=tuple(remove_vgpu_type or ()),
                     maintenance=tuple(sorted(set(maintenance or []))))
    out = common.console
    missing = guests_missing()
    if missing:
        out.print(f"[yellow]note:[/] guests need {missing}; starting the vCenter part only "
                  "(apply --no-provision works; provision and bench need guests)",
                  highlight=False)
    lab, record = simstate.up(shape, inventory_out,
                              say=lambda text: out.print(f"  {text}", highlight=False))
    out.print(f"[bold green]simulator lab running[/] at {lab.url} (pid {lab.pid})")
    out.print(f"  {hosts} ESXi {shape.esxi_version} (build {shape.esxi_build}) host(s) x "
              f"{gpus} A100 80GB, host driver VIB {shape.vib_version}, "
              f"template {shape.template}, user {shape.username}")
    if shape.removed_vgpu_types:
        out.print(f"  vGPU types removed: {', '.join(shape.removed_vgpu_types)}")
    if shape.maintenance:
        out.print("  in maintenance mode: "
                  + ", ".join(host_name(i) for i in shape.maintenance))
    network = record.guest_network
    if network is not None:
        out.print(f"  guests: one per VM that `vgpu apply` creates, an sshd at the VM's IP "
                  f"({network.address(11)}..{network.address(40)}) with simulated NVIDIA "
                  f"tooling; login {network.key_file}; simulated driver and licence token "
                  f"in {network.files}", highlight=False)
        out.print(f"  {_docker_line(record)}", highlight=False)
    else:
        out.print(f"  guests: none (missing: {record.guests_missing})", highlight=False)
    out.print(f"  inventory written to {inventory_out.resolve()}")
    out.print(f"  password file {lab.workdir / simstate.PASSWORD_FILE}; for "
              f"inventory/sim.yaml: export VGPU_VCENTER_PASSWORD='{lab.password}'")
    out.print(f"next: vgpu preflight --scenario 8\n"
              f"      vgpu apply --scenario 8 --yes{'' if network else ' --no-provision'}\n"
              "      vgpu sim status\n"
              "      vgpu sim down")


def _docker_line(record: LabRecord) -> str:
    from vgpu.sim import follow

    network = record.guest_network
    daemon = network.daemon() if network is not None else None
    if daemon is None:
        return (f"guests' docker: simulated only (missing for a real daemon: "
                f"{record.docker_missing or 'none recorded'}); {follow.SIM_RUNTIME_NOTE}")
    return (f"guests' docker: a real dockerd (pid {daemon.pid}, {daemon.storage_driver}, "
            f"images in {daemon.root}); the harness image is built and every instance runs "
            "in its own container; --gpus is simulated (no GPU here: ONNX Runtime's CPU "
            "build)")


def guests_missing() -> str | None:
    from vgpu.sim.guests import missing_for_guests

    return missing_for_guests()


def _check_host_indexes(indexes: list[int], hosts: int) -> None:
    bad = sorted(i for i in indexes if i >= hosts)
    if bad:
        raise InputError.single("command line", "--maintenance",
                                f"host index {bad[0]} is not below --hosts {hosts}",
                                fix=f"use host indexes 0..{hosts - 1}")


UPGRADED_BUILD = "24022510"  # ESXi 8.0.3
UPGRADED_VIB = "550.90.05-1OEM.800.1.0.20613240"


@sim_app.command("upgrade")
def sim_upgrade(
    esxi_build: Annotated[str, typer.Option(help="the ESXi build every host reports "
                                            "afterwards")] = UPGRADED_BUILD,
    vib_version: Annotated[str, typer.Option(help="the NVIDIA host driver VIB version "
                                             "every host reports afterwards")] = UPGRADED_VIB,
) -> None:
    """Upgrade the running lab's hosts (a new ESXi build and NVIDIA host driver VIB), for
    `vgpu revalidate` to find the drift. Its vCenter restarts at the same URL; the
    simulator keeps no VMs across that, so the next apply or revalidate creates them
    again; guests keep what was provisioned on them."""
    from vgpu.sim import state as simstate

    lab, _ = simstate.upgrade(esxi_build, vib_version)
    common.console.print(f"simulator lab upgraded at {lab.url} (pid {lab.pid}): ESXi build "
                         f"{esxi_build}, host driver VIB {vib_version}; its VMs are created "
                         "again by the next `vgpu apply` or `vgpu revalidate`",
                         highlight=False)


@sim_app.command("down")
def sim_down() -> None:
    """Stop the simulator lab started by `vgpu sim up` and remove everything it made: its
    guests (their processes, network namespaces and veths), the Docker daemon and its
    containers (its images stay cached for the next lab), the bridge, the guests' login
    user and sudo rule, and the inventory file."""
    from vgpu.sim import guests
    from vgpu.sim import state as simstate

    stopped = simstate.down()
    common.console.print(f"stopped the simulator lab at {stopped}" if stopped
                         else "no simulator lab was running")
    if guests_missing() is None and guests.owner_pid() is None:
        guests.sweep()  # also what a killed lab left behind
        left = guests.leftovers()
        if left:
            raise RemoteError("still on this machine after `vgpu sim down`: "
                              + ", ".join(left))


@sim_app.command("status")
def sim_status() -> None:
    """Say whether a simulator lab started by `vgpu sim up` is running, where, and list its
    guests (VM, IP, up or down, the simulated vGPU / MIG slice)."""
    from vgpu.sim import state as simstate

    running = simstate.status()
    if running is None:
        common.console.print("no simulator lab is running (start one with `vgpu sim up`)")
        raise typer.Exit(1)
    from vgpu.sim import guests

    out = common.console
    out.print(f"running at {running.url} (pid {running.pid}), inventory "
              f"{running.inventory}")
    network = running.guest_network
    if network is None:
        out.print(f"guests: none (missing: {running.guests_missing})", highlight=False)
        return
    listed = guests.read_guests(network)
    out.print(_docker_line(running), highlight=False)
    out.print(f"guests: {len(listed)} (one per VM `vgpu apply` created; simulated NVIDIA "
              "tooling)", highlight=False)
    for guest in listed:
        out.print(f"  {guest.vm:<16} {guest.address:<15} "
                  f"{'up' if guest.running() else 'DOWN'}  {guest.hardware} (simulated)",
                  highlight=False)
