"""Revalidation's first phase: the vCenter hosts' facts now, compared with the facts saved
by the last preflight of the same inventory (the drift), and what that means for each
scenario (a breaking change or a failed check stops it before anything is changed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from vgpu.errors import InputError
from vgpu.model.inventory import Inventory
from vgpu.model.load import vgpu_requests
from vgpu.model.scenario import Scenario


@dataclass
class PreflightPhase:
    """The drift (None on the first preflight of this inventory), the saved facts' id
    and, per scenario that cannot run, why."""

    drift: dict[str, Any] | None
    facts_id: str | None
    blockers: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def run_preflight_phase(inventory: Inventory, inventory_path: Path,
                        scenarios: Sequence[Scenario], facts_dir: Path,
                        console: Console) -> PreflightPhase:
    from vgpu.vsphere.connection import connect
    from vgpu.vsphere.drift import compute_drift, scenario_vgpu_types
    from vgpu.vsphere.from_inventory import target_from_inventory
    from vgpu.vsphere.preflight import run_preflight
    from vgpu.vsphere.preflight_saved import find_saved, load_saved, save_report
    from vgpu.vsphere.render import render_drift

    if inventory.vcenter is None:
        return PreflightPhase(None, None, notes=["the inventory has no vCenter: no host "
                                                 "facts, no drift"])
    try:
        before = load_saved(find_saved("last", facts_dir, inventory_path))
    except InputError:
        before = None
    vm_scenarios = [s for s in scenarios if s.platform == "vsphere"]
    with connect(target_from_inventory(inventory, inventory_path)) as session:
        report = run_preflight(session, inventory, inventory_path, None)
        fits = {s.id: run_preflight(session, inventory, inventory_path, s)
                for s in vm_scenarios}
    phase = PreflightPhase(None, None)
    used = {s.id: scenario_vgpu_types(vgpu_requests(s)) for s in vm_scenarios}
    if before is None:
        phase.notes.append(f"no earlier preflight of {inventory_path} in {facts_dir}: these "
                           "facts are the reference for the next revalidation")
    else:
        drift = compute_drift(before, report, set().union(*used.values()))
        report.drift = drift.to_json()
        render_drift(drift, console)
        for sc in vm_scenarios:
            mine = compute_drift(before, report, used[sc.id])
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
