"""Preflight: can this vCenter run vGPU scenarios, and this scenario in particular?

Reads the cluster (hosts, their drivers and advanced options, the VMs holding vGPUs) and
judges it with the pure checks of ``checks``. With a scenario: does its plan fit
(on hosts not in maintenance mode), and does every planned VM's host offer its vGPU types.
``saved`` keeps each run's report for drift checks."""

from __future__ import annotations

import time
from pathlib import Path

from vgpu.errors import InputError, PlanError
from vgpu.model.inventory import Inventory
from vgpu.model.scenario import Scenario
from vgpu.vsphere.connect.connection import Session
from vgpu.vsphere.connect.from_inventory import placement_from_inventory
from vgpu.vsphere.plan.from_plan import desired_from_plan, held_from_facts
from vgpu.vsphere.plan.host_options import (
    GPU_VM_OPTIONS,
    option_check_detail,
    read_option,
    read_options,
)
from vgpu.vsphere.plan.host_resources import resource_summary
from vgpu.vsphere.plan.reconcile import read_state, template_firmware
from vgpu.vsphere.plan.workflow import ScenarioState, read_scenario_state
from vgpu.vsphere.preflight.checks import (
    MIG_CAPABILITY_NOTE,
    MULTI_VGPU_ESXI,
    Check,
    HostReport,
    PreflightReport,
    add_nic_firmware_checks,
    driver_version_note,
    excuse_unused_maintenance,
    form_factor_notes,
    held_gpu_model,
    host_report,
    passthrough_checks,
    policy_checks,
    reboot_note,
    scenario_kinds,
    template_checks,
    version_tuple,
    vgpu_mode_checks,
)
from vgpu.vsphere.read.facts import HostFacts, read_host_drivers


def host_option_checks(facts: HostFacts, wanted: dict[str, str]) -> list[Check]:
    """The scenario's ESXi advanced options (vm_settings.ats) as the host has them."""
    checks: list[Check] = []
    for key, value in sorted(wanted.items()):
        ok, detail = option_check_detail(read_option(facts, key), value)
        checks.append(Check(f"advanced option {key}", ok, detail))
    return checks


def _scenario_checks(scenario_state: ScenarioState, reports: list[HostReport],
                     inventory: Inventory, inventory_path: Path,
                     notes: list[str]) -> list[Check]:
    hosts = scenario_state.state.hosts
    try:
        plan = scenario_state.build_plan()
    except PlanError as exc:
        return [Check("capacity", False, str(exc))]
    excuse_unused_maintenance(reports, {vm.host for vm in plan.vms})
    _add_host_option_checks(scenario_state, reports, {vm.host for vm in plan.vms})
    add_nic_firmware_checks(scenario_state, plan, reports)
    held = len(scenario_state.held)
    checks = [Check("capacity", True, f"{len(plan.vms)} VM(s) fit"
                    + (f" beside {held} held vGPU(s)" if held else "")),
              Check("host memory and CPUs", True, resource_summary(plan, hosts))]
    failing = sorted({vm.host for vm in plan.vms}
                     & {r.name for r in reports if not r.ok})
    checks.append(Check("planned hosts", not failing,
                        "the plan uses " + ", ".join(failing) + ", which fail their checks"
                        if failing else "every host the plan uses passes its checks"))
    try:
        desired_from_plan(plan, inventory, hosts, str(inventory_path))
        uses_vgpu = any(v.kind != "passthrough" for vm in plan.vms for v in vm.vgpus)
        checks.append(Check("vGPU types", True, "every planned vGPU type is offered by its host"
                            if uses_vgpu else "no vGPU planned; every passthrough GPU is on "
                            "its host"))
    except InputError as exc:
        checks.append(Check("vGPU types", False, str(exc)))
    checks += policy_checks(plan, hosts)
    checks += passthrough_checks(plan, hosts, inventory, notes)
    checks += template_checks(scenario_state)
    checks += vgpu_mode_checks(plan, hosts, inventory)
    multi = [vm for vm in plan.vms if vm.host in hosts
             and sum(v.kind != "passthrough" for v in vm.vgpus) > 1]
    old = sorted({vm.host for vm in multi
                  if version_tuple(hosts[vm.host].version) < MULTI_VGPU_ESXI})
    if multi:
        checks.append(Check("several vGPUs per VM", not old,
                            "needs ESXi 8.0 on " + ", ".join(old) if old
                            else "ESXi 8.0+ on every host used"))
    return checks


def _add_host_option_checks(scenario_state: ScenarioState, reports: list[HostReport],
                            used: set[str]) -> None:
    """Each host the plan uses reports the scenario's advanced options (ATS)."""
    wanted = scenario_state.scenario.vm_settings.host_options()
    hosts = scenario_state.state.hosts
    for report in reports:
        facts = hosts.get(report.name)
        if wanted and facts is not None and report.name in used and facts.usable:
            report.checks += host_option_checks(facts, wanted)


def run_preflight(session: Session, inventory: Inventory, inventory_path: Path,
                  scenario: Scenario | None, pin_host: str | None = None) -> PreflightReport:
    """``pin_host``: the scenario's checks plan every VM on that host (`--host`)."""
    scenario_state: ScenarioState | None = None
    if scenario is not None:
        scenario_state = read_scenario_state(session, scenario, inventory, inventory_path,
                                             pin_host)
        state, held, notes = scenario_state.state, scenario_state.held, scenario_state.notes
    else:
        state = read_state(session, placement_from_inventory(inventory, inventory_path))
        gpu = held_gpu_model(inventory, state.hosts)
        # No scenario: every VM's vGPUs count as held, vgpu's own included.
        held, notes = held_from_facts(state.hosts, state.vms, "", gpu, inventory) \
            if gpu else ([], [])
    wanted = [h.name for h in inventory.hosts] or sorted(state.hosts)
    read_host_drivers({n: state.hosts[n] for n in wanted if n in state.hosts})
    kinds = scenario_kinds(scenario) if scenario is not None else None
    reports = [host_report(name, state.hosts.get(name), held, inventory, list(state.hosts),
                            kinds) for name in wanted]
    option_keys = sorted({*GPU_VM_OPTIONS,
                          *(scenario.vm_settings.host_options() if scenario else {})})
    for report in reports:
        facts = state.hosts.get(report.name)
        if facts is not None and facts.connection_state == "connected":
            report.advanced_options = read_options(facts, option_keys)
    notes = [*notes, *(note for n in wanted if n in state.hosts
                       if (note := driver_version_note(state.hosts[n], inventory)))]
    notes += [note for n in wanted if n in state.hosts
              if (note := reboot_note(state.hosts[n]))]
    notes += [note for n in wanted if n in state.hosts
              for note in form_factor_notes(state.hosts[n], inventory)]
    if any(g.mig_capable is not None and g.vgpu_mode is None for r in reports for g in r.gpus):
        notes.append(MIG_CAPABILITY_NOTE)
    scenario_checks = _scenario_checks(scenario_state, reports, inventory, inventory_path,
                                       notes) if scenario_state is not None else []
    template = template_firmware(state)
    return PreflightReport(
        vcenter=session.target.address, vcenter_version=str(session.content.about.fullName),
        inventory=str(inventory_path), scenario=scenario.id if scenario else None,
        taken_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        hosts=reports, scenario_checks=scenario_checks, notes=notes,
        template=template[0] if template else None,
        template_firmware=template[1] if template else None)
