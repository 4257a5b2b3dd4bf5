"""Where a scenario's harness instances run on an inventory: its VMs as vCenter reports
them (owned by vgpu, marked with the scenario id, with their guest IP), or its bare-metal
hosts; each with the SSH target it is reached by, read from the inventory as provisioning
reads it (``vgpu.provision.reach``), and the platform recorded with its results."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from vgpu.errors import RemoteError
from vgpu.model.inventory import Inventory
from vgpu.model.plan import Plan, PlannedVM
from vgpu.model.scenario import Scenario
from vgpu.provision.reach import host_target
from vgpu.remote.targets import HostTarget
from vgpu.results.store.records import Platform, TargetKind

if TYPE_CHECKING:
    from vgpu.site import Site
    from vgpu.vsphere.read.facts import HostFacts

NO_GPU = "no GPU"


@dataclass(frozen=True)
class HarnessPlacement:
    """One harness instance: the planned VM (or bare-metal tenant) and where it runs."""

    instance: str
    host_target: HostTarget | None  # None: this machine
    planned_slice: str
    target_kind: TargetKind
    platform: Platform
    gpu_index: int | None = None  # a whole GPU: its index on the host / in the guest


def _slice_of(plan: Plan, name: str) -> str:
    return "+".join(v.label for v in plan.vm(name).vgpus) or NO_GPU


def per_whole_gpu(vm: PlannedVM, base: HarnessPlacement) -> list[HarnessPlacement]:
    """A VM with several whole GPUs passed through gets one harness instance per GPU
    (``<vm>-gpu<k>``, GPU k in the guest), so every GPU is measured; any other VM is one
    instance on GPU 0 of its guest."""
    whole = [v for v in vm.vgpus if v.kind == "passthrough"]
    if len(whole) < 2 or len(whole) != len(vm.vgpus):
        return [replace(base, gpu_index=0 if vm.vgpus else None)]
    return [replace(base, instance=f"{vm.name}-gpu{k}", planned_slice="passthrough",
                    gpu_index=k) for k in range(len(whole))]


def _whole_gpu_index(vm: PlannedVM) -> int | None:
    """The host GPU index of a bare-metal tenant that has a whole GPU (not a MIG slice)."""
    whole = [v for v in vm.vgpus if v.kind == "passthrough"]
    return whole[0].gpu_index if whole else None


def vsphere_placements(scenario: Scenario, inventory: Inventory, inventory_path: Path, *,
                       simulated: str | None = None) -> list[HarnessPlacement]:
    """The scenario's VMs as vCenter reports them; ``simulated`` says what of their platform
    is a simulator (recorded with each result)."""
    from vgpu.vsphere.connect.connection import connect
    from vgpu.vsphere.connect.from_inventory import target_from_inventory
    from vgpu.vsphere.plan.workflow import read_scenario_state
    from vgpu.vsphere.read.facts import read_host_drivers

    with connect(target_from_inventory(inventory, inventory_path)) as session:
        state = read_scenario_state(session, scenario, inventory, inventory_path)
        plan = state.build_plan()
        vms = state.state.vms
        used = {vms[vm.name].host for vm in plan.vms if vm.name in vms}
        hosts = state.state.hosts
        read_host_drivers({name: f for name, f in hosts.items() if name in used})
    placements = []
    for vm in plan.vms:
        actual = vms.get(vm.name)
        if actual is None or not actual.owned or actual.scenario != scenario.id:
            raise RemoteError(f"VM {vm.name} of scenario {scenario.id} is not in vCenter "
                              f"(owned by vgpu): run `vgpu apply` and `vgpu provision` first")
        if not actual.powered_on or not actual.ip:
            raise RemoteError(f"VM {vm.name} has no guest IP (powered "
                              f"{'on' if actual.powered_on else 'off'}): power it on and "
                              "check VMware Tools")
        facts = hosts.get(actual.host or "")
        platform = Platform(
            simulator=simulated,
            host=actual.host, esxi_version=facts.version if facts else None,
            esxi_build=facts.build if facts else None, gpu=scenario.gpu,
            host_driver=_driver_text(facts),
            firmware=actual.firmware, vm_hardware_version=actual.hardware_version,
            vgpu_profile="+".join(actual.vgpus) or None,
            mig_profile="+".join(v.label for v in vm.vgpus if v.kind == "mig") or None,
            attachment="passthrough" if actual.passthrough_ids else "vgpu",
            vcpus=actual.num_cpus, memory_gb=actual.memory_mb / 1024,
        )
        reach = host_target(vm.name, actual.ip, inventory.ssh, inventory_path.parent)
        placements += per_whole_gpu(vm, HarnessPlacement(vm.name, reach,
                                                         _slice_of(plan, vm.name), "vm",
                                                         platform))
    return placements


def _driver_text(facts: HostFacts | None) -> str | None:
    driver = facts.host_driver if facts else None
    return f"{driver.name} {driver.version}" if driver else None


def bare_metal_placements(scenario: Scenario, inventory: Inventory, inventory_path: Path,
                          plan: Plan) -> list[HarnessPlacement]:
    """The plan's tenants on the inventory's bare-metal hosts: on this machine for a
    local host, else over SSH with the host's own SSH settings or the inventory's."""
    hosts = {h.name: h for h in inventory.bare_metal}
    reach: dict[str, HostTarget | None] = {}
    for name in dict.fromkeys(vm.host for vm in plan.vms):
        host = hosts[name]
        # Read for a local host too: a sudo password file others may read is refused.
        target = host_target(host.name, host.address, host.ssh or inventory.ssh,
                             inventory_path.parent)
        reach[name] = None if host.is_local else target
    return [
        HarnessPlacement(vm.name, reach[vm.host], _slice_of(plan, vm.name), "bare-metal",
                         Platform(host=vm.host, gpu=scenario.gpu, attachment="none",
                                  mig_profile=_slice_of(plan, vm.name)),
                         gpu_index=_whole_gpu_index(vm))
        for vm in plan.vms
    ]


def scenario_placements(scenario: Scenario, site: Site) -> list[HarnessPlacement]:
    """Where the scenario's instances run on the site's inventory: its VMs as vCenter
    reports them, or its bare-metal hosts. Bench and training both start from here."""
    inventory, path = site.require(f"scenario {scenario.id} runs on an inventory's hosts",
                                   fix="pass --inventory FILE")
    if scenario.platform == "vsphere":
        return vsphere_placements(scenario, inventory, path, simulated=(
            site.lab.description if site.lab is not None else None))
    return bare_metal_placements(scenario, inventory, path, site.plan(scenario))
