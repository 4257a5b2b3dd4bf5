"""The upgrade window of one ESXi host: `vgpu drain` (vgpu's own VMs on it shut down, the
host into maintenance mode, its facts saved and tied to its baselines) and `vgpu undrain`
(the upgrade checked to have taken, then the host out of maintenance mode).

A host with a reboot pending stays in maintenance mode: the reboot it needs is done
there, and leaving it would put VMs on a host whose installed driver is not running."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pyVmomi import vim

from vgpu.errors import InputError, ParameterError, RemoteError
from vgpu.model.inventory import Inventory
from vgpu.results.store import ResultStore
from vgpu.vsphere import drainrecord, privileges
from vgpu.vsphere.connection import Session, connect
from vgpu.vsphere.drainrecord import DrainRecord
from vgpu.vsphere.facts import HostFacts, VmActual, read_host_driver
from vgpu.vsphere.from_inventory import placement_from_inventory, target_from_inventory
from vgpu.vsphere.preflight import run_preflight
from vgpu.vsphere.preflight_saved import save_report
from vgpu.vsphere.reconcile import ClusterState, read_state
from vgpu.vsphere.tasks import call
from vgpu.vsphere.xorg import settle_graphics

Say = Callable[[str], None]
POLL_S = 0.5


@dataclass(frozen=True)
class WindowPaths:
    facts_dir: Path  # preflight facts (as `vgpu preflight` saves them)
    records_dir: Path  # drain records
    db: str | None  # the results store whose baselines the drain is tied to; None: none


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _host(state: ClusterState, host: str, inventory: Inventory) -> HostFacts:
    facts = state.hosts.get(host)
    if facts is None or host not in {h.name for h in inventory.hosts}:
        names = ", ".join(h.name for h in inventory.hosts) or "none"
        raise ParameterError(drainrecord.HOST, f"host {host} is not an inventory host in "
                             "vCenter", f"use one of: {names}")
    return facts


def _driver(facts: HostFacts) -> str | None:
    driver = facts.host_driver
    return f"{driver.name} {driver.version}" if driver else None


def _vms_on(state: ClusterState, host: str) -> tuple[list[VmActual], list[VmActual]]:
    """The powered-on VMs on ``host``: vgpu's own, and the others."""
    on = [vm for vm in state.vms.values() if vm.host == host and vm.powered_on
          and not vm.is_template]
    return [vm for vm in on if vm.owned], [vm for vm in on if not vm.owned]


def shut_down(vm: VmActual, timeout_s: float, say: Say) -> None:
    """A guest shutdown, waited for up to ``timeout_s``; then a power-off."""
    try:
        vm.ref.ShutdownGuest()
    except vim.fault.ToolsUnavailable:
        say(f"{vm.name}: no VMware Tools to shut the guest down: powering off")
    else:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if vm.ref.runtime.powerState == vim.VirtualMachine.PowerState.poweredOff:
                say(f"{vm.name}: guest shut down")
                return
            time.sleep(POLL_S)
        say(f"{vm.name}: the guest did not shut down within {timeout_s:.0f} s: powering off")
    if vm.ref.runtime.powerState != vim.VirtualMachine.PowerState.poweredOff:
        call(f"power off {vm.name}", vm.ref.PowerOffVM_Task)


def drain(inventory: Inventory, inventory_path: Path, host: str, paths: WindowPaths,
          shutdown_timeout_s: float, say: Say) -> DrainRecord:
    """Shut vgpu's VMs on ``host`` down, put it in maintenance mode, and save its facts
    first. VMs vgpu does not own are never touched: one powered on there refuses the drain
    before anything changes. A host already drained is left as it is."""
    with connect(target_from_inventory(inventory, inventory_path)) as session:
        privileges.check_window(session, "vgpu drain", host, inventory, inventory_path)
        state = read_state(session, placement_from_inventory(inventory, inventory_path))
        facts = _host(state, host, inventory)
        if facts.in_maintenance:
            return _drained_already(paths.records_dir, host, say)
        mine, others = _vms_on(state, host)
        if others:
            raise RemoteError(
                f"host {host} runs VMs vgpu does not own: {', '.join(v.name for v in others)}"
                "; nothing was changed. Move them to another host or power them off (vgpu "
                f"never touches them), then run `vgpu drain --host {host}` again")
        read_host_driver(facts)
        report = run_preflight(session, inventory, inventory_path, None)
        facts_id = save_report(report, paths.facts_dir).stem
        say(f"facts before the upgrade saved as {facts_id} (ESXi build {facts.build}, host "
            f"driver {_driver(facts) or '-'}, booted {facts.boot_time or '-'})")
        for vm in mine:
            shut_down(vm, shutdown_timeout_s, say)
        call(f"enter maintenance mode on {host}", facts.ref.EnterMaintenanceMode_Task, 0)
        say(f"host {host} is in maintenance mode")
    record = DrainRecord(
        host=host, inventory=str(inventory_path.resolve()), drained_at=_now(),
        facts_id=facts_id, hardware_uuid=facts.hardware_uuid, boot_time=facts.boot_time,
        esxi_build=facts.build, host_driver=_driver(facts),
        assignment_policy=facts.assignment_policy,
        vms_shut_down=[vm.name for vm in mine], baselines=_tie_baselines(paths.db, host,
                                                                         facts_id))
    drainrecord.save(record, paths.records_dir)
    return record


def _drained_already(records_dir: Path, host: str, say: Say) -> DrainRecord:
    try:
        record = drainrecord.load(records_dir, host)
    except InputError:
        raise ParameterError(drainrecord.HOST,
                             f"host {host} is in maintenance mode, and not by `vgpu drain`: "
                             "its facts before the upgrade are unknown",
                             "exit maintenance mode in vCenter and drain it with vgpu before "
                             "the upgrade") from None
    if record.undrained_at is not None:
        raise ParameterError(drainrecord.HOST,
                             f"host {host} is in maintenance mode again after its undrain at "
                             f"{record.undrained_at}",
                             "exit maintenance mode in vCenter and drain it again")
    say(f"host {host} is in maintenance mode already (drained at {record.drained_at}): "
        "nothing changed")
    return record


def _tie_baselines(db: str | None, host: str, facts_id: str) -> list[str]:
    """Every baseline set measured on ``host`` gets these facts as its pre-upgrade ones."""
    if db is None:
        return []
    tied = []
    with ResultStore.open_existing(db) as store:
        for record in store.baseline_sets():
            if record.host == host:
                store.put_baseline_set(replace(record, drain_facts_id=facts_id))
                tied.append(record.name)
    return tied


@dataclass(frozen=True)
class Refusal:
    reason: str
    fix: str


def upgrade_refusals(record: DrainRecord, now: HostFacts, expect_upgrade: bool) -> list[Refusal]:
    """Why the host must stay in maintenance mode: a reboot pending (the installed driver
    is not the running one), not booted since the drain, or (``expect_upgrade``) the same
    build and driver as before it."""
    out = []
    if now.reboot_required:
        out.append(Refusal(
            f"host {now.name} has a reboot pending: the installed host driver "
            f"({_driver(now) or '-'}) is not the one running",
            f"reboot {now.name} (it stays in maintenance mode), then run `vgpu undrain "
            f"--host {now.name}` again"))
    elif expect_upgrade and now.boot_time is not None and record.boot_time is not None \
            and now.boot_time <= record.boot_time:
        out.append(Refusal(
            f"host {now.name} has not booted since the drain (booted {now.boot_time})",
            f"finish the upgrade with a reboot, then run `vgpu undrain --host {now.name}` "
            "again (--no-upgrade when the window was for something else)"))
    if expect_upgrade and not out and now.build == record.esxi_build \
            and _driver(now) == record.host_driver:
        out.append(Refusal(
            f"host {now.name} reports the ESXi build ({now.build}) and host driver "
            f"({_driver(now) or '-'}) it had before the drain: the upgrade did not take",
            "install the upgrade and reboot, then undrain again (--no-upgrade when the "
            "window was for something else)"))
    return out


def _wait_connected(session: Session, inventory: Inventory, inventory_path: Path,
                    host: str, timeout_s: float, say: Say) -> HostFacts:
    deadline = time.monotonic() + timeout_s
    while True:
        state = read_state(session, placement_from_inventory(inventory, inventory_path))
        facts = _host(state, host, inventory)
        if facts.connection_state == "connected":
            return facts
        if time.monotonic() > deadline:
            raise RemoteError(f"host {host} is {facts.connection_state} after "
                              f"{timeout_s:.0f} s: reconnect it in vCenter, then run `vgpu "
                              f"undrain --host {host}` again")
        say(f"host {host} is {facts.connection_state}: waiting")
        time.sleep(POLL_S * 4)


def undrain(inventory: Inventory, inventory_path: Path, host: str, paths: WindowPaths,
            connect_timeout_s: float, expect_upgrade: bool, say: Say) -> HostFacts:
    """Check the upgrade of a drained host took, then take it out of maintenance mode.
    RemoteError (exit 1), the host left in maintenance mode, when it did not."""
    record = drainrecord.load(paths.records_dir, host)
    with connect(target_from_inventory(inventory, inventory_path)) as session:
        privileges.check_window(session, "vgpu undrain", host, inventory, inventory_path)
        facts = _wait_connected(session, inventory, inventory_path, host,
                                connect_timeout_s, say)
        read_host_driver(facts)
        if record.hardware_uuid and facts.hardware_uuid \
                and record.hardware_uuid != facts.hardware_uuid:
            raise RemoteError(f"host {host} is another machine (hardware UUID "
                              f"{facts.hardware_uuid}) than was drained "
                              f"({record.hardware_uuid}); it stays in maintenance mode. "
                              "Capture a new baseline on it before trusting a comparison")
        refusals = upgrade_refusals(record, facts, expect_upgrade)
        if refusals:
            raise RemoteError("; ".join(r.reason for r in refusals) + f". Host {host} stays "
                              "in maintenance mode. Fix: " + "; ".join(r.fix for r in refusals))
        booted = facts.boot_time is not None and record.boot_time is not None \
            and facts.boot_time > record.boot_time
        settle_graphics(facts, record.assignment_policy, booted, say)
        if facts.in_maintenance:
            call(f"exit maintenance mode on {host}", facts.ref.ExitMaintenanceMode_Task, 0)
        facts = _wait_connected(session, inventory, inventory_path, host,
                                connect_timeout_s, say)
        if facts.in_maintenance:
            raise RemoteError(f"host {host} is still in maintenance mode after leaving it: "
                              "check its tasks in vCenter")
        read_host_driver(facts)
    record.undrained_at = _now()
    drainrecord.save(record, paths.records_dir)
    return facts
