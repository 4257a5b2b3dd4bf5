"""Scenario + inventory + what vCenter has -> plan, desired VMs and change set.

This is the one place that joins the pure planner with vCenter facts; ``vgpu apply``,
``vgpu destroy`` and ``vgpu preflight`` all read through it, so they agree on what a
scenario needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vgpu.errors import PlanError, Problem
from vgpu.model.inventory import Inventory
from vgpu.model.load import vgpu_requests
from vgpu.model.plan import Plan
from vgpu.model.scenario import Scenario
from vgpu.planner import HeldVgpu, build_plan
from vgpu.vsphere.connect.connection import Session
from vgpu.vsphere.connect.from_inventory import placement_from_inventory
from vgpu.vsphere.desired.vm import VmDesired
from vgpu.vsphere.plan.diff import ChangeSet
from vgpu.vsphere.plan.from_plan import desired_from_plan, held_from_facts
from vgpu.vsphere.plan.gpu_modes import mig_esxi_problems, vgpu_mode_holds
from vgpu.vsphere.plan.gpu_placement import PolicyChange, plan_policy_changes
from vgpu.vsphere.plan.host_options import HostOptionChange, plan_host_options
from vgpu.vsphere.plan.host_resources import resource_problems
from vgpu.vsphere.plan.reconcile import ClusterState, plan_apply, plan_teardown, read_state


@dataclass
class ScenarioState:
    """A read of vCenter for one scenario, with the held vGPUs the plan must avoid."""

    scenario: Scenario
    inventory: Inventory
    inventory_path: Path
    state: ClusterState
    held: list[HeldVgpu]
    notes: list[str] = field(default_factory=list)
    pin_host: str | None = None  # --host: every VM of the scenario on this host

    def build_plan(self) -> Plan:
        """Raises PlanError (nothing changed) when the scenario does not fit beside what
        other VMs hold on the hosts that are not in maintenance mode (on the pinned host,
        when there is one), or when a host's memory or logical CPUs do not hold its VMs, or its ESXi
        is too old for the MIG-backed vGPUs planned on it."""
        plan = build_plan(self.scenario, self.inventory, held=self.held,
                          inventory_name=str(self.inventory_path),
                          unavailable=self.unavailable_hosts(), pin_host=self.pin_host)
        problems = resource_problems(plan, self.state.hosts, self.state.vms) \
            + mig_esxi_problems(plan, self.state.hosts)
        if problems:
            source = self.scenario.source or str(self.inventory_path)
            raise PlanError([Problem(source, "vms", p) for p in problems])
        return plan

    def unavailable_hosts(self) -> dict[str, str]:
        """Inventory hosts the plan must not use: those vCenter has in maintenance mode."""
        names = {h.name for h in self.inventory.hosts}
        return {name: "in maintenance mode" for name, facts in self.state.hosts.items()
                if facts.in_maintenance and name in names}


@dataclass
class ApplyPreparation:
    plan: Plan
    desired: list[VmDesired]
    changes: ChangeSet
    scenario_state: ScenarioState
    host_options: list[HostOptionChange] = field(default_factory=list)  # ATS, to set
    policy_changes: list[PolicyChange] = field(default_factory=list)  # GPU assignment

    @property
    def state(self) -> ClusterState:
        return self.scenario_state.state


def read_scenario_state(session: Session, scenario: Scenario, inventory: Inventory,
                        inventory_path: Path, pin_host: str | None = None) -> ScenarioState:
    state = read_state(session, placement_from_inventory(inventory, inventory_path))
    held, notes = held_from_facts(state.hosts, state.vms, scenario.id, scenario.gpu_model,
                                  inventory)
    kinds = {r.kind for requests in vgpu_requests(scenario).values() for r in requests}
    if kinds and "passthrough" not in kinds:  # vGPUs only: Shared Direct GPUs only
        held += vgpu_mode_holds(state.hosts, inventory, held)
    return ScenarioState(scenario, inventory, inventory_path, state, held, notes, pin_host)


def prepare_apply(session: Session, scenario: Scenario, inventory: Inventory,
                  inventory_path: Path, pin_host: str | None = None) -> ApplyPreparation:
    scenario_state = read_scenario_state(session, scenario, inventory, inventory_path,
                                         pin_host)
    plan = scenario_state.build_plan()
    source = scenario.source or str(inventory_path)
    desired = desired_from_plan(plan, inventory, scenario_state.state.hosts,
                                str(inventory_path))
    changes = plan_apply(scenario_state.state, desired, scenario.id, source,
                         str(inventory_path))
    used = sorted({vm.host for vm in plan.vms})
    host_options = plan_host_options(scenario_state.state.hosts, used,
                                     scenario.vm_settings.host_options())
    policy_changes = plan_policy_changes(plan, scenario_state.state.hosts)
    return ApplyPreparation(plan, desired, changes, scenario_state, host_options,
                            policy_changes)


def prepare_destroy(session: Session, scenario_id: str, inventory: Inventory,
                    inventory_path: Path) -> tuple[ClusterState, ChangeSet]:
    state = read_state(session, placement_from_inventory(inventory, inventory_path))
    return state, plan_teardown(state, scenario_id)
