"""vSphere commands: preflight, apply, destroy. Parsing only: the work is in
vgpu.vsphere.commands, imported when a command runs, so other commands do not pay for
loading pyVmomi."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vgpu.cli import common
from vgpu.cli.common import scenario_from_args
from vgpu.cli.options import HostOpt, InventoryReq, ScenarioFile, ScenarioRef, inventory_option
from vgpu.cli.root import app
from vgpu.errors import InputError, Problem
from vgpu.vsphere.desired.limits import DEFAULT_CONCURRENCY, DEFAULT_IP_TIMEOUT_S

if TYPE_CHECKING:
    from vgpu.model.inventory import Inventory
    from vgpu.model.scenario import Scenario
    from vgpu.site import Site

InventoryOpt = Annotated[Path | None, inventory_option(
    "inventory YAML (or name in inventory/); a bare-metal scenario without one is applied on "
    "this machine", without="a bare-metal scenario is applied on this machine")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")]
ConcurrencyOpt = Annotated[int, typer.Option("--concurrency", "--parallel", min=1, max=64,
                                             help="VMs worked on at the same time")]
BreakLeaseOpt = Annotated[bool, typer.Option(
    "--break-lease", help="take the lab's lease even though another run holds it (only when "
    "that run died: two runs at once change the lab against each other)")]


def _inventory(path: Path | None) -> tuple[Inventory, Path]:
    assert path is not None, "InventoryReq resolves or refuses"
    return common.site_of(path).require("this command needs an inventory",
                                        fix="pass --inventory FILE")


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
    inv, inv_path = _inventory(inventory)
    sc = scenario_from_args(file, scenario) if (file or scenario) else None

    from vgpu.vsphere import commands
    from vgpu.vsphere.preflight.saved import NONE_SAVED, SAVED_RUN

    with common.flag_names({SAVED_RUN: "--against"},
                           {NONE_SAVED: "run `vgpu preflight` once without --against first"}):
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
    host: HostOpt = None,
    break_lease: BreakLeaseOpt = False,
) -> None:
    """Make vCenter match the scenario's plan: create, change or delete its VMs (only VMs
    vgpu created for this scenario), power them on with their planned IPs, then provision
    their guests over SSH. A bare-metal scenario instead gets its MIG layout created on
    each bare-metal host through NVML (this machine, or over SSH)."""
    sc = scenario_from_args(file, scenario)

    from vgpu.cli.plan_view import print_warnings
    from vgpu.cli.provision import provision_scenario
    from vgpu.vsphere import commands
    from vgpu.vsphere.connect.from_inventory import require_vcenter

    site = common.site_of(inventory)
    if sc.platform == "bare-metal":
        _apply_bare_metal(sc, site, enable_mig, dry_run, accept_new_host_keys)
        return
    if inventory is None:
        raise InputError.single("command line", "--inventory",
                                f"scenario {sc.id} creates vSphere VMs and needs an inventory",
                                fix="pass --inventory FILE (try `vgpu sim up` for a lab)")
    inv, inv_path = _inventory(inventory)
    require_vcenter(inv, inv_path, sc.id)
    # Everything the whole command needs is checked before vCenter is reached: the layout
    # on empty GPUs (vCenter can only make it tighter) and provisioning's local inputs.
    print_warnings(site.plan(sc, pin_host=host), common.console)
    if provision:
        _check_provision_inputs(sc, site, dry_run)
    commands.apply(sc, inv, inv_path, dry_run=dry_run, confirm=common.terminal_confirm(yes),
                   concurrency=concurrency, ip_timeout_s=ip_timeout, console=common.console,
                   host=host, break_lease=break_lease)
    if not dry_run:
        _start_simulator_guests(sc, site, host)
    if provision and not dry_run:
        common.console.print("[bold]Provisioning the guests[/]")
        provision_scenario(sc, site, accept_new_host_keys=accept_new_host_keys)


def _start_simulator_guests(sc: Scenario, site: Site, host: str | None) -> None:
    """On `vgpu sim up`'s inventory: a guest (sshd) for every VM of the scenario."""
    lab = site.lab
    if lab is None:
        return
    if lab.guests_missing is not None:
        common.console.print(f"note: simulator lab without guests (missing: "
                             f"{lab.guests_missing}); the VMs have no SSH to provision "
                             "or bench on", highlight=False)
        return
    for guest in lab.start_for_apply(site.plan(sc, pin_host=host)):
        common.console.print(f"simulator guest {guest.vm} at {guest.address} "
                             f"({guest.hardware}, simulated)", highlight=False)


def _check_provision_inputs(sc: Scenario, site: Site, dry_run: bool) -> None:
    from vgpu.cli.provision import provision_jobs

    try:
        provision_jobs(sc, site)
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


def _apply_bare_metal(sc: Scenario, site: Site, enable_mig: bool, dry_run: bool,
                      accept_new_host_keys: bool) -> None:
    from vgpu.cli.mig import mig_flag_names
    from vgpu.nvml.baremetal import apply_bare_metal

    with mig_flag_names():
        lines = apply_bare_metal(sc, site, enable_mig=enable_mig, dry_run=dry_run,
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
    """Shut down (guest first, then power off) and delete the VMs vgpu created for the
    scenario. VMs it did not create are never touched."""
    sc = _vsphere_scenario(file, scenario)

    from vgpu.vsphere import commands

    inv, inv_path = _inventory(inventory)
    commands.destroy(sc, inv, inv_path, confirm=common.terminal_confirm(yes),
                     concurrency=concurrency, console=common.console,
                     break_lease=break_lease)
    site = common.site_of(inventory)
    removed = site.lab.stop_for_destroy(site.plan(sc)) if site.lab is not None else []
    for guest in removed:
        common.console.print(f"simulator guest {guest.vm} at {guest.address} removed",
                             highlight=False)
