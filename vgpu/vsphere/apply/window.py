"""The upgrade window of one ESXi host: `vgpu drain` (vgpu's own VMs on it shut down, the
host into maintenance mode, its facts saved and tied to its baselines) and `vgpu undrain`
(the upgrade checked to have taken, then the host out of maintenance mode).

A host with a reboot pending stays in maintenance mode: the reboot it needs is done
there, and leaving it would put VMs on a host whose installed driver is not running."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyVmomi import vim

from vgpu.errors import InputError, ParameterError, RemoteError
from vgpu.model.inventory import Inventory
from vgpu.vsphere.apply.lease import LabLease
from vgpu.vsphere.connect import privileges
from vgpu.vsphere.connect.connection import Session, connect
from vgpu.vsphere.connect.from_inventory import placement_from_inventory, target_from_inventory
from vgpu.vsphere.connect.tasks import TaskCancelled, call
from vgpu.vsphere.desired import drainrecord
from vgpu.vsphere.desired.drainrecord import DrainRecord
from vgpu.vsphere.plan.gpustack import stack_findings
from vgpu.vsphere.plan.reconcile import ClusterState, read_state
from vgpu.vsphere.plan.xorg import settle_graphics
from vgpu.vsphere.preflight.run import run_preflight
from vgpu.vsphere.preflight.saved import save_report
from vgpu.vsphere.read.facts import HostFacts, VmActual, driver_branch, read_host_driver

Say = Callable[[str], None]
# (host, its hardware UUID, the id of its saved facts) -> the baseline sets now tied to
# those facts as their pre-upgrade ones: the caller's, which knows the results store
# (vgpu.revalidate.hosts.tie_drain_facts)
TieBaselines = Callable[[str, str | None, str], list[str]]
POLL_S = 0.5
# vCenter's own default waits an hour; an upgrade window that cannot start says so sooner.
DEFAULT_MAINTENANCE_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class WindowPaths:
    facts_dir: Path  # preflight facts (as `vgpu preflight` saves them)
    records_dir: Path  # drain records


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


@dataclass(frozen=True)
class VmsOnHost:
    """The powered-on VMs on a host: vgpu's own, vSphere's system VMs (vCLS, agent VMs:
    left to maintenance mode), and everyone else's."""

    mine: list[VmActual]
    system: list[VmActual]
    others: list[VmActual]


def vms_on(state: ClusterState, host: str) -> VmsOnHost:
    on = [vm for vm in state.vms.values() if vm.host == host and vm.powered_on
          and not vm.is_template]
    return VmsOnHost(mine=[vm for vm in on if vm.owned],
                     system=[vm for vm in on if not vm.owned and vm.system_role],
                     others=[vm for vm in on if not vm.owned and not vm.system_role])


def _refuse_others(host: str, others: list[VmActual], done: str) -> None:
    if others:
        raise RemoteError(
            f"host {host} runs VMs vgpu does not own: {', '.join(v.name for v in others)}"
            f"; {done}. Move them to another host or power them off (vgpu never touches "
            f"them), then run `vgpu drain --host {host}` again")


def shut_down(vm: VmActual, timeout_s: float, say: Say) -> None:
    """A guest shutdown, waited for up to ``timeout_s``; then a power-off."""
    try:
        vm.ref.ShutdownGuest()
    except vim.fault.ToolsUnavailable:
        say(f"{vm.name}: no VMware Tools to shut the guest down: powering off")
    except vim.fault.InvalidPowerState:
        return  # off already (shut down by an earlier, interrupted drain)
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


def window_lease(session: Session, state: ClusterState, inventory: Inventory,
                 inventory_path: Path, command: str, say: Say) -> LabLease:
    """The lab's lease for one step of a host's window (a campaign holding it already
    passes through: the lease is reentrant within one process)."""
    names = placement_from_inventory(inventory, inventory_path)
    return LabLease(session, state.placement.folder, names.lab, command,
                    warn=lambda text: say(f"warning: {text}"))


def enter_maintenance(facts: HostFacts, timeout_s: float, say: Say) -> None:
    """EnterMaintenanceMode, waited for up to ``timeout_s``; a task still running then is
    cancelled (vCenter would otherwise go on trying for its own hour) and the state said."""
    what = f"enter maintenance mode on {facts.name}"
    try:
        call(what, facts.ref.EnterMaintenanceMode_Task, 0, timeout_s=timeout_s,
             cancel_on_timeout=True)
    except TaskCancelled as exc:
        in_maintenance = bool(facts.ref.runtime.inMaintenanceMode)
        raise RemoteError(
            f"{exc} (a VM that cannot be moved off, or DRS not fully automated); the host "
            f"is {'in' if in_maintenance else 'not in'} maintenance mode and vgpu's VMs on "
            f"it are shut down. Check the host's VMs and tasks in vCenter, then run `vgpu "
            f"drain --host {facts.name}` again") from None
    say(f"host {facts.name} is in maintenance mode")


def drain(inventory: Inventory, inventory_path: Path, host: str, paths: WindowPaths,
          shutdown_timeout_s: float, say: Say,
          maintenance_timeout_s: float = DEFAULT_MAINTENANCE_TIMEOUT_S,
          tie_baselines: TieBaselines | None = None) -> DrainRecord:
    """Shut vgpu's VMs on ``host`` down, put it in maintenance mode, and save its facts
    first. VMs vgpu does not own are never touched: one powered on there refuses the drain
    before anything changes. vSphere's system VMs (vCLS, agent VMs) are left to
    maintenance mode, which stops or moves them itself. The lab's lease is held throughout;
    a ``draining`` record is written before the first change, so a drain killed midway
    is continued by the next one. A host drained already is left as it is.
    ``tie_baselines`` ties the host's baselines to the facts saved first (None: none)."""
    with connect(target_from_inventory(inventory, inventory_path)) as session:
        privileges.check_window(session, "vgpu drain", host, inventory, inventory_path)
        state = read_state(session, placement_from_inventory(inventory, inventory_path))
        facts = _host(state, host, inventory)
        earlier = drainrecord.find(paths.records_dir, host)
        if facts.in_maintenance:
            return _drained_already(paths.records_dir, host, say)
        on_host = vms_on(state, host)
        _refuse_others(host, on_host.others, "nothing was changed")
        with window_lease(session, state, inventory, inventory_path, f"drain --host {host}",
                          say):
            record = _draining_record(earlier, facts, on_host, inventory, inventory_path,
                                      session, paths, say, tie_baselines)
            drainrecord.save(record, paths.records_dir)
            for vm in on_host.mine:
                shut_down(vm, shutdown_timeout_s, say)
            # DRS may have moved VMs onto the host meanwhile: look again just before.
            state = read_state(session, placement_from_inventory(inventory, inventory_path))
            again = vms_on(state, host)
            shut = ", ".join(record.vms_shut_down) or "none"
            _refuse_others(host, again.others, f"vgpu's VMs on it are shut down ({shut}), "
                           "the host is not in maintenance mode")
            for vm in again.mine:  # powered on again meanwhile (HA, a colleague)
                shut_down(vm, shutdown_timeout_s, say)
            if again.system:
                roles = ", ".join(sorted({v.system_role or "" for v in again.system}))
                say(f"left to maintenance mode: {', '.join(v.name for v in again.system)} "
                    f"(vSphere's own {roles}: it stops or moves them)")
            enter_maintenance(facts, maintenance_timeout_s, say)
    record.status = drainrecord.DRAINED
    record.system_vms = sorted(v.name for v in again.system)
    drainrecord.save(record, paths.records_dir)
    return record


def _draining_record(earlier: DrainRecord | None, facts: HostFacts, on_host: VmsOnHost,
                     inventory: Inventory, inventory_path: Path, session: Session,
                     paths: WindowPaths, say: Say,
                     tie_baselines: TieBaselines | None) -> DrainRecord:
    """The record written before the first change: an interrupted drain's own (its facts
    were read before anything changed), else facts read and saved now."""
    mine = [vm.name for vm in on_host.mine]
    if earlier is not None and earlier.status == drainrecord.DRAINING \
            and earlier.undrained_at is None:
        say(f"continuing the drain of {facts.name} begun at {earlier.drained_at}")
        earlier.vms_shut_down = sorted({*earlier.vms_shut_down, *mine})
        return earlier
    read_host_driver(facts)
    report = run_preflight(session, inventory, inventory_path, None)
    facts_id = save_report(report, paths.facts_dir).stem
    say(f"facts before the upgrade saved as {facts_id} (ESXi build {facts.build}, host "
        f"driver {_driver(facts) or '-'}, booted {facts.boot_time or '-'})")
    return DrainRecord(
        host=facts.name, inventory=str(inventory_path.resolve()), drained_at=_now(),
        facts_id=facts_id, hardware_uuid=facts.hardware_uuid, boot_time=facts.boot_time,
        esxi_build=facts.build, host_driver=_driver(facts),
        assignment_policy=facts.assignment_policy, vms_shut_down=mine,
        baselines=tie_baselines(facts.name, facts.hardware_uuid, facts_id)
        if tie_baselines else [],
        status=drainrecord.DRAINING, gpus=sorted(g.pci_id for g in facts.gpus),
        vgpu_types=sorted(facts.vgpu_types),
        vgpu_types_in_use=sorted({t for vm in on_host.mine for t in vm.vgpus}),
        graphics=dict(sorted(facts.graphics_active_per_gpu.items())),
        vgpu_modes=dict(sorted(facts.vgpu_mode_per_gpu.items())))


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
    if record.status == drainrecord.DRAINING:  # killed after maintenance mode was reached
        record.status = drainrecord.DRAINED
        drainrecord.save(record, records_dir)
    say(f"host {host} is in maintenance mode already (drained at {record.drained_at}): "
        "nothing changed")
    return record


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
        refusals = upgrade_refusals(record, facts, expect_upgrade) + [
            Refusal(f.reason, f.fix) for f in stack_findings(
                record, facts, intended_branch=driver_branch(
                    inventory.drivers.host_driver_version),
                image_managed=inventory.placement.image_managed
                if inventory.placement else None)]
        if refusals:
            raise RemoteError("; ".join(r.reason for r in refusals) + f". Host {host} stays "
                              "in maintenance mode. Fix: " + "; ".join(r.fix for r in refusals))
        unread = "" if facts.vgpu_mode_per_gpu else (
            "; each GPU's vGPU mode is not reported before ESXi 8.0 U3: not checked "
            "(`nvidia-smi -q` on the host shows MIG and ECC mode)")
        say(f"host {host}: GPU stack as at the drain ({len(record.gpus)} GPU(s), "
            f"{len(facts.vgpu_types)} vGPU type(s) offered, host driver "
            f"{_driver(facts) or '-'}){unread}")
        booted = facts.boot_time is not None and record.boot_time is not None \
            and facts.boot_time > record.boot_time
        state = read_state(session, placement_from_inventory(inventory, inventory_path))
        with window_lease(session, state, inventory, inventory_path,
                          f"undrain --host {host}", say):
            settle_graphics(facts, record.assignment_policy, booted, say)
            if facts.in_maintenance:
                call(f"exit maintenance mode on {host}", facts.ref.ExitMaintenanceMode_Task,
                     0)
        facts = _wait_connected(session, inventory, inventory_path, host,
                                connect_timeout_s, say)
        if facts.in_maintenance:
            raise RemoteError(f"host {host} is still in maintenance mode after leaving it: "
                              "check its tasks in vCenter")
        read_host_driver(facts)
    record.undrained_at = _now()
    drainrecord.save(record, paths.records_dir)
    return facts
