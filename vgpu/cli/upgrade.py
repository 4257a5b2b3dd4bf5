"""The upgrade window of one ESXi host: `vgpu drain --host H` before the upgrade, `vgpu
undrain --host H` after it, then `vgpu revalidate --host H`. Parsing only: the work is in
vgpu.vsphere.apply.window, imported when a command runs (it loads pyVmomi)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from vgpu.cli import common
from vgpu.cli.options import DbOpt, InventoryReq
from vgpu.cli.root import app
from vgpu.defaults import DEFAULT_DB
from vgpu.vsphere.desired.drainrecord import DEFAULT_DIR, HOST, NOT_DRAINED

HostReq = Annotated[str, typer.Option("--host", help="the ESXi host, as vCenter names it",
                                      show_default=False)]
FactsDirOpt = Annotated[Path, typer.Option(help="where preflight facts are saved")]
RecordsDirOpt = Annotated[Path, typer.Option(help="where drain records are saved")]
DEFAULT_FACTS = Path("vgpu-results/preflight")
# The window's host parameter is --host here; a host never drained gets the command to run.
WINDOW_FLAGS = {HOST: "--host"}
WINDOW_FIXES = {NOT_DRAINED: "run `vgpu drain --host {host}` before the upgrade (it saves "
                             "the facts the upgrade is checked against)"}


def _say(text: str) -> None:
    common.console.print(text, highlight=False, markup=False)


@app.command("drain")
def drain_command(
    host: HostReq,
    inventory: InventoryReq = None,
    shutdown_timeout: Annotated[float, typer.Option(
        min=0.0, help="seconds a guest gets to shut down before its VM is powered off")] =
        120.0,
    maintenance_timeout: Annotated[float, typer.Option(
        min=1.0, help="seconds maintenance mode may take; a task still running then is "
        "cancelled and the host's state said")] = 900.0,
    db: DbOpt = DEFAULT_DB,
    facts_dir: FactsDirOpt = DEFAULT_FACTS,
    records_dir: RecordsDirOpt = DEFAULT_DIR,
) -> None:
    """Before an upgrade of HOST: save its facts (tied to the baselines measured on it),
    shut vgpu's own VMs on it down (guest shutdown, then power-off after the timeout) and
    put it in maintenance mode, holding the lab's lease. VMs vgpu does not own are never
    touched: one running there refuses the drain; vSphere's own (vCLS, agent VMs) are left
    to maintenance mode. Exit 1 when vCenter refuses, 2 on bad input."""
    from vgpu.results.store.result_store import store_exists
    from vgpu.revalidate.hosts import tie_drain_facts
    from vgpu.vsphere.apply.window import WindowPaths, drain

    assert inventory is not None  # InventoryReq finds one or stops with exit 2
    loaded, path = common.site_of(inventory).require("drain needs an inventory",
                                                     fix="pass --inventory")
    with common.flag_names(WINDOW_FLAGS, WINDOW_FIXES):
        record = drain(loaded, path, host, WindowPaths(facts_dir, records_dir),
                       shutdown_timeout, _say, maintenance_timeout,
                       tie_baselines=partial(tie_drain_facts, db) if store_exists(db) else None)
    if record.baselines:
        _say(f"pre-upgrade facts {record.facts_id} tied to baseline(s) "
             f"{', '.join(record.baselines)}")
    _say(f"next: upgrade {host} (ESXi, NVIDIA host driver VIB), then `vgpu undrain --host "
         f"{host}` and `vgpu revalidate --host {host}`")


@app.command("undrain")
def undrain_command(
    host: HostReq,
    inventory: InventoryReq = None,
    connect_timeout: Annotated[float, typer.Option(
        min=0.0, help="seconds to wait for the host to be connected")] = 600.0,
    upgrade: Annotated[bool, typer.Option(
        "--upgrade/--no-upgrade", help="check that the host was upgraded (booted since the "
        "drain, a new build or host driver); --no-upgrade: the window was for something "
        "else")] = True,
    facts_dir: FactsDirOpt = DEFAULT_FACTS,
    records_dir: RecordsDirOpt = DEFAULT_DIR,
) -> None:
    """After the upgrade of HOST: wait until it is connected, check the upgrade took (no
    reboot pending, booted since the drain, the running host driver) and left the NVIDIA
    stack as at the drain (VIB, GPUs, vGPU types, Shared Direct, vGPU mode), restart Xorg
    when graphics settings changed meanwhile (vSGA GPUs need it running; without Xorg a
    boot puts them in effect), then take it out of maintenance mode. Where the upgrade did
    not take, the host stays in maintenance mode and this exits 1 with the reason and the
    fix; 2 when it was never drained."""
    from vgpu.vsphere.apply.window import WindowPaths, undrain
    from vgpu.vsphere.desired.drainrecord import load

    assert inventory is not None
    loaded, path = common.site_of(inventory).require("undrain needs an inventory",
                                                     fix="pass --inventory")
    with common.flag_names(WINDOW_FLAGS, WINDOW_FIXES):
        before = load(records_dir, host)  # exit 2 before vCenter is reached
        facts = undrain(loaded, path, host, WindowPaths(facts_dir, records_dir),
                        connect_timeout, upgrade, _say)
    driver = facts.host_driver
    running = f"{driver.name} {driver.version}" if driver else "-"
    _say(f"host {host} is out of maintenance mode: ESXi build {before.esxi_build} -> "
         f"{facts.build}, host driver {before.host_driver or '-'} -> {running} (running: "
         f"no reboot pending, booted {facts.boot_time or '-'})")
    _say(f"next: `vgpu revalidate --host {host}` (its VMs: "
         f"{', '.join(before.vms_shut_down) or 'none'})")
