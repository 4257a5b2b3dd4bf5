"""Revalidation's first phase: the vCenter hosts' facts now, compared with the facts the
baseline was measured against (those `vgpu drain` saved before the upgrade, else the
capture's; the last saved preflight of the inventory only where the baseline recorded
none): the drift, and what it means for each scenario (a breaking change or a failed check
stops it before anything is changed). A pinned host must be there, out of maintenance
mode, and the same machine (hardware UUID) its baseline was measured on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from vgpu.errors import InputError
from vgpu.model.inventory import Inventory
from vgpu.model.load import vgpu_requests
from vgpu.model.scenario import Scenario

if TYPE_CHECKING:
    from vgpu.vsphere.preflight.checks import PreflightReport


@dataclass(frozen=True)
class HostPin:
    """The host a revalidation is pinned to (--host) and what its baseline recorded."""

    host: str | None = None
    across_hosts: bool = False  # --other-host: the baseline is another host's
    facts_id: str | None = None  # the baseline's pre-upgrade facts; None: the last saved
    hardware_uuid: str | None = None  # the machine the baseline was measured on
    baseline: str = ""  # the judged set's name, for messages


@dataclass
class PreflightPhase:
    """The drift (None on the first preflight of this inventory), the saved facts' id
    and, per scenario that cannot run, why."""

    drift: dict[str, Any] | None
    facts_id: str | None
    blockers: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    host_uuid: str | None = None  # the pinned host's hardware UUID


def _before(pin: HostPin, facts_dir: Path, inventory_path: Path) -> dict[str, Any] | None:
    from vgpu.vsphere.preflight.saved import find_saved, load_saved

    if pin.facts_id is not None:  # the baseline's facts must be there: no silent fallback
        return load_saved(find_saved(pin.facts_id, facts_dir, inventory_path))
    try:
        return load_saved(find_saved("last", facts_dir, inventory_path))
    except InputError:
        return None


def check_pinned_host(pin: HostPin, report: PreflightReport) -> str | None:
    """Refuse (exit 2) a pinned host that is absent, in maintenance mode, or another
    machine than its baseline's; its hardware UUID otherwise."""
    if pin.host is None:
        return None
    found = next((h for h in report.hosts if h.name == pin.host), None)
    if found is None or found.connection_state == "absent":
        raise InputError.single("command line", "--host", f"host {pin.host} is not among the "
                                "inventory's hosts in vCenter",
                                fix="use one of: " + ", ".join(h.name for h in report.hosts))
    if found.in_maintenance:
        raise InputError.single("command line", "--host",
                                f"host {pin.host} is in maintenance mode",
                                fix=f"run `vgpu undrain --host {pin.host}` once its upgrade "
                                    "is done, then revalidate")
    if (pin.hardware_uuid and found.hardware_uuid and not pin.across_hosts
            and pin.hardware_uuid != found.hardware_uuid):
        raise InputError.single(
            "command line", "--host",
            f"host {pin.host} is another machine (hardware UUID {found.hardware_uuid}) than "
            f"baseline '{pin.baseline}' was measured on ({pin.hardware_uuid})",
            fix="capture a new baseline on it (--capture-baseline --replace), or judge "
                f"across machines with --other-host {pin.host}")
    return found.hardware_uuid


def run_preflight_phase(inventory: Inventory, inventory_path: Path,
                        scenarios: Sequence[Scenario], facts_dir: Path,
                        console: Console, pin: HostPin = HostPin()) -> PreflightPhase:
    from vgpu.vsphere.connect.connection import connect
    from vgpu.vsphere.connect.from_inventory import target_from_inventory
    from vgpu.vsphere.preflight.drift import compute_drift, only_host, scenario_vgpu_types
    from vgpu.vsphere.preflight.run import run_preflight
    from vgpu.vsphere.preflight.saved import save_report
    from vgpu.vsphere.render import render_drift

    if inventory.vcenter is None:
        return PreflightPhase(None, None, notes=["the inventory has no vCenter: no host "
                                                 "facts, no drift"])
    before = _before(pin, facts_dir, inventory_path)
    vm_scenarios = [s for s in scenarios if s.platform == "vsphere"]
    with connect(target_from_inventory(inventory, inventory_path)) as session:
        report = run_preflight(session, inventory, inventory_path, None)
        host_uuid = check_pinned_host(pin, report)
        fits = {s.id: run_preflight(session, inventory, inventory_path, s, pin_host=pin.host)
                for s in vm_scenarios}
    phase = PreflightPhase(None, None, host_uuid=host_uuid)
    # Preflight judged the intended guest driver against drivers.host_driver_version: say
    # where a host's VIB is another (provisioning judges the running one against the VIB
    # vCenter reports for its host, vgpu.provision.host_drivers).
    phase.notes += [n for n in report.notes if "drivers.host_driver_version" in n]
    used = {s.id: scenario_vgpu_types(vgpu_requests(s)) for s in vm_scenarios}
    if before is None:
        phase.notes.append(f"no earlier preflight of {inventory_path} in {facts_dir}: these "
                           "facts are the reference for the next revalidation")
    else:
        drift = only_host(compute_drift(before, report, set().union(*used.values())),
                          pin.host)
        report.drift = drift.to_json()
        render_drift(drift, console)
        for sc in vm_scenarios:
            mine = only_host(compute_drift(before, report, used[sc.id]), pin.host)
            broken = [f"{r.host}: {r.field} {r.before} -> {r.after} ({r.why})"
                      for r in mine.rows if r.breaking]
            if broken:
                phase.blockers[sc.id] = "drift breaks it: " + "; ".join(broken)
    phase.facts_id = save_report(report, facts_dir).stem
    phase.drift = report.drift
    for sc_id, fit in fits.items():
        failed = [f"{c.name}: {c.detail}" for c in fit.scenario_checks if not c.ok]
        if failed and sc_id not in phase.blockers:
            phase.blockers[sc_id] = "preflight: " + "; ".join(failed)
    return phase
