"""Bridge between the pure planner and vCenter facts.

- ``held_from_facts``: the vGPUs other VMs already hold on each host, in the planner's terms,
  so the plan places around them (or refuses before any change).
- ``desired_from_plan``: a Plan's VMs as ``VmDesired``, with each vGPU type matched to the
  exact name the host offers (``A100D-1-10C`` -> ``grid_a100d-1-10c``, or
  ``grid_a100dx-1-10c`` where the GPU's PCI device id is an HGX board's).
"""

from __future__ import annotations

from dataclasses import dataclass

from vgpu import mig
from vgpu.errors import InputError, Problem
from vgpu.model.inventory import Inventory
from vgpu.model.plan import Plan, PlannedRdmaNic, PlannedVgpu, PlannedVM
from vgpu.model.vgpu_request import VgpuRequest, parse_vgpu
from vgpu.planner import HeldVgpu
from vgpu.vsphere.desired.vm import (
    GuestNetwork,
    OwnerMarks,
    PassthroughDevice,
    RdmaNicDevice,
    VmDesired,
)
from vgpu.vsphere.read.facts import HostFacts, VmActual


@dataclass
class _GpuLoad:
    pci_id: str
    mig: list[mig.MigProfile]
    timesliced: list[str]
    passthrough: bool = False

    @property
    def empty(self) -> bool:
        return not (self.mig or self.timesliced or self.passthrough)


def gpu_order(facts: HostFacts, inventory: Inventory | None) -> list[str]:
    """PCI addresses in the planner's GPU index order: the inventory's pci_ids when it
    lists them, else the order the host reports its GPUs in."""
    if inventory is not None:
        for host in inventory.hosts:
            if host.name == facts.name:
                listed = [pci for g in host.gpus for pci in g.pci_ids]
                if listed:
                    return listed
    return [g.pci_id for g in facts.gpus]


def _foreign(vm: VmActual, scenario_id: str) -> bool:
    return not (vm.owned and vm.scenario == scenario_id)


def _place_held(load: list[_GpuLoad], request: VgpuRequest, gpu: mig.GpuModel) -> int | None:
    for index, g in enumerate(load):
        if g.passthrough:
            continue
        if request.kind == "mig" and request.profile is not None and not g.timesliced:
            if mig.is_placeable(gpu, [*g.mig, request.profile]):
                g.mig.append(request.profile)
                return index
        elif request.kind == "timesliced" and request.timesliced_type and not g.mig:
            size = request.framebuffer_gb
            same = not g.timesliced or set(g.timesliced) == {request.timesliced_type}
            if same and len(g.timesliced) < gpu.memory_gb // size:
                g.timesliced.append(request.timesliced_type)
                return index
    return None


def _listed_gpu(vm: VmActual, facts: HostFacts, order: list[str]) -> int | None:
    """The GPU index the host lists a powered-on VM on, when it lists it on exactly one."""
    if not vm.powered_on:
        return None
    listed = [pci for pci, names in facts.vms_per_gpu.items() if vm.name in names]
    if len(listed) != 1 or listed[0] not in order:
        return None
    return order.index(listed[0])


def _hold(load: _GpuLoad, request: VgpuRequest) -> None:
    if request.kind == "mig" and request.profile is not None:
        load.mig.append(request.profile)
    elif request.timesliced_type:
        load.timesliced.append(request.timesliced_type)


def held_from_facts(
    hosts: dict[str, HostFacts], vms: dict[str, VmActual], scenario_id: str,
    gpu: mig.GpuModel, inventory: Inventory | None = None,
) -> tuple[list[HeldVgpu], list[str]]:
    """vGPUs held by VMs that are not this scenario's, assigned to GPUs.

    A powered-on VM sits where the host lists it (``HostGraphicsInfo.vm``, per GPU).
    Powered-off VMs count too (they claim their vGPU again at power-on, on a GPU ESXi picks
    then), as do VMs the host lists on no single GPU: those are packed the way a
    consolidating host fills GPUs (largest first, first GPU with room). Returns the held
    list and notes on what could not be accounted for."""
    held: list[HeldVgpu] = []
    notes: list[str] = []
    for facts in hosts.values():
        order = gpu_order(facts, inventory)
        load = [_GpuLoad(pci, [], []) for pci in order]
        requests: list[tuple[str, VgpuRequest]] = []
        for vm in sorted(vms.values(), key=lambda v: v.name):
            if vm.host != facts.name or not _foreign(vm, scenario_id):
                continue
            for pci in vm.passthrough_ids:
                if pci in order:
                    load[order.index(pci)].passthrough = True
                    held.append(HeldVgpu(facts.name, order.index(pci), vm.name,
                                         "passthrough", "passthrough"))
            for pci in vm.dynamic_passthrough_ids:
                if pci in order and not load[order.index(pci)].passthrough:
                    load[order.index(pci)].passthrough = True
                    held.append(HeldVgpu(facts.name, order.index(pci), vm.name,
                                         "passthrough", "Dynamic DirectPath"))
            if vm.dynamic_unassigned:
                notes.append(f"{facts.name}: VM {vm.name} takes {vm.dynamic_unassigned} "
                             "GPU(s) through Dynamic DirectPath at power-on, ESXi picks "
                             "which then; not counted")
            listed = _listed_gpu(vm, facts, order)
            for vgpu_type in vm.vgpus:
                try:
                    request = parse_vgpu(vgpu_type, gpu)
                except mig.ProfileParseError:
                    notes.append(f"{facts.name}: VM {vm.name} holds {vgpu_type}, not a "
                                 f"{gpu.key} type; not counted")
                    continue
                if listed is None:
                    requests.append((vm.name, request))
                    continue
                _hold(load[listed], request)
                held.append(HeldVgpu(facts.name, listed, vm.name, request.kind, request.label))
        requests.sort(key=lambda r: -(r[1].profile.memory_slices if r[1].profile else 0))
        for vm_name, request in requests:
            index = _place_held(load, request, gpu)
            if index is None:
                notes.append(f"{facts.name}: no GPU has room for {request.label} held by "
                             f"{vm_name} (over-committed host?)")
                continue
            held.append(HeldVgpu(facts.name, index, vm_name, request.kind, request.label))
    return held, notes


def _device_board(vgpu: PlannedVgpu, gpu: mig.GpuModel, facts: HostFacts,
                  order: list[str]) -> str | None:
    """The board code of the GPU the vGPU is planned on, from its PCI device id as the
    host shows it (None when the host does not show that GPU)."""
    pci = vgpu.pci_id or (order[vgpu.gpu_index] if vgpu.gpu_index < len(order) else None)
    device = next((g for g in facts.gpus if g.pci_id == pci), None)
    return gpu.board_for_pci(device.device_id) if device else None


def _type_candidates(vgpu: PlannedVgpu, gpu: mig.GpuModel, facts: HostFacts,
                     order: list[str]) -> list[str]:
    """The host names to try for a planned vGPU: under the board of the GPU's PCI device
    id first (an HGX A100 80GB offers grid_a100dx-*, a PCIe one grid_a100d-*), then under
    every board code of the model."""
    assert vgpu.vgpu_type is not None
    return gpu.host_type_candidates(vgpu.vgpu_type, _device_board(vgpu, gpu, facts, order))


def _host_type(candidates: list[str], facts: HostFacts) -> str | None:
    return next((c for c in candidates if c in facts.vgpu_types), None)


def _guest_network(ip: str | None, inventory: Inventory) -> GuestNetwork | None:
    if ip is None:
        return None
    pool = inventory.network.ip_pool
    if pool is None:
        return GuestNetwork(ip=ip)
    return GuestNetwork(ip=ip, netmask=pool.netmask, gateway=pool.gateway,
                        dns=tuple(pool.dns), domain=pool.domain)


def _rdma_nic(vm: PlannedVM, facts: HostFacts, inventory: Inventory, source: str,
              problems: list[Problem]) -> RdmaNicDevice | None:
    """The VM's planned RDMA NIC as a device, read against the host's PCI devices."""
    planned: PlannedRdmaNic | None = vm.rdma_nic
    if planned is None:
        return None
    device = facts.pci_devices.get(planned.pci_id)
    if device is None:
        problems.append(Problem(source, f"hosts ({vm.host}).rdma_nics",
                                f"VM {vm.name} needs the RDMA NIC {planned.pci_id} of "
                                f"{vm.host}, which vCenter does not show",
                                fix="check the host's PCI devices (vgpu preflight) and the "
                                    "NIC's pci_id in the inventory"))
        return None
    network = planned.network or (inventory.placement.network if inventory.placement else None)
    return RdmaNicDevice(pci_id=planned.pci_id, kind=planned.kind, vendor_id=device.vendor_id,
                         device_id=device.device_id, network=network)


def desired_from_plan(
    plan: Plan, inventory: Inventory, hosts: dict[str, HostFacts], source: str,
) -> list[VmDesired]:
    """The Plan's VMs as the vSphere layer's desired state, or InputError naming every VM
    whose host lacks the vGPU type or GPU it needs."""
    gpu = mig.gpu_model(plan.gpu_model)
    owner = OwnerMarks(scenario=plan.scenario_id, plan_hash=plan.plan_hash,
                       lab=inventory.lab_name)
    guest_id = inventory.placement.guest_id if inventory.placement else None
    port_group = inventory.placement.network if inventory.placement else None
    problems: list[Problem] = []
    desired: list[VmDesired] = []
    for vm in plan.vms:
        facts = hosts.get(vm.host)
        if facts is None:
            problems.append(Problem(source, f"hosts ({vm.host})",
                                    f"VM {vm.name} is planned on host {vm.host}, which vCenter "
                                    f"does not have; it has: {', '.join(sorted(hosts))}",
                                    fix="use the host names vCenter shows"))
            continue
        vgpus: list[str] = []
        passthrough: list[PassthroughDevice] = []
        order = gpu_order(facts, inventory)
        for planned in vm.vgpus:
            if planned.kind == "passthrough":
                pci = planned.pci_id or (order[planned.gpu_index]
                                         if planned.gpu_index < len(order) else None)
                device = next((g for g in facts.gpus if g.pci_id == pci), None)
                if device is None:
                    problems.append(Problem(source, f"hosts ({vm.host})",
                                            f"VM {vm.name} needs GPU {planned.gpu_index} of "
                                            f"{vm.host} for passthrough, which vCenter does "
                                            "not show", fix="check the host's GPUs and pci_ids"))
                    continue
                passthrough.append(PassthroughDevice(device.pci_id, device.vendor_id,
                                                     device.device_id))
                continue
            candidates = _type_candidates(planned, gpu, facts, order)
            host_type = _host_type(candidates, facts)
            if host_type is None:
                tried = ", ".join(candidates)
                offered = ", ".join(facts.vgpu_types) or "none"
                problems.append(Problem(source, f"hosts ({vm.host})",
                                        f"VM {vm.name} needs {planned.label} ({tried}) but "
                                        f"{vm.host} offers: {offered}",
                                        fix="enable MIG / install the vGPU host driver, or "
                                            "pick a profile the host offers"))
                continue
            vgpus.append(host_type)
        rdma_nic = _rdma_nic(vm, facts, inventory, source, problems)
        shared = [v for v in vm.vgpus if v.kind != "passthrough"]
        indexes = sorted({v.gpu_index for v in shared if v.gpu_index < len(order)})
        memory, compute = max(((v.memory_slices or 0, v.compute_slices or 0) for v in shared),
                              default=(0, 0))
        desired.append(VmDesired(
            name=vm.name, host=vm.host, num_cpus=vm.vcpu, memory_mb=vm.memory_mb, owner=owner,
            vgpus=tuple(vgpus), passthrough=tuple(passthrough), rdma_nic=rdma_nic,
            extra_config=dict(vm.extra_config), network=_guest_network(vm.ip, inventory),
            port_group=port_group,
            firmware=vm.firmware, memory_reservation_locked=vm.memory_reservation_locked,
            guest_id=guest_id, planned_gpus=tuple(order[i] for i in indexes),
            power_on_order=(indexes[0] if indexes else 0, -memory, -compute),
        ))
    if problems:
        raise InputError(problems)
    return desired
