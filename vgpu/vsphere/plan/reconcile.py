"""Desired VMs + what vCenter has -> a checked change set. Everything here reads; nothing
changes until the change set is handed to the Executor."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.errors import InputError, Problem
from vgpu.vsphere.connect.connection import (
    Session,
    VmPlacementNames,
    VmPlacementObjects,
    resolve_placement,
)
from vgpu.vsphere.desired.instances import InstanceRecord
from vgpu.vsphere.desired.vm import VmDesired
from vgpu.vsphere.plan.diff import ChangeSet, Step, plan_changes, plan_destroy
from vgpu.vsphere.read.facts import HostFacts, VmActual, read_hosts, read_vm_list
from vgpu.vsphere.read.ownership import lab_scope, lab_view


@dataclass
class ClusterState:
    """One consistent read of the placement objects, every VM and every host. ``vms`` holds
    the lab's folder and cluster by name and every other VM under ``name [moId]``
    (vgpu.vsphere.read.ownership.lab_view)."""

    placement: VmPlacementObjects
    vms: dict[str, VmActual]
    hosts: dict[str, HostFacts]


def read_state(session: Session, names: VmPlacementNames) -> ClusterState:
    placement = resolve_placement(session, names)
    vms = lab_view(read_vm_list(session, placement.datacenter), lab_scope(placement),
                   InstanceRecord(placement.lab).uuids())
    root = placement.cluster if placement.cluster is not None \
        else placement.datacenter.hostFolder
    return ClusterState(placement=placement, vms=vms, hosts=read_hosts(session, root, vms))


def check_desired(desired: list[VmDesired], state: ClusterState, source: str) -> None:
    """Every VM's host exists and offers every vGPU type it asks for (exact names)."""
    problems: list[Problem] = []
    for vm in desired:
        host = state.hosts.get(vm.host)
        if host is None:
            problems.append(Problem(
                source, f"VM {vm.name} host",
                f"host {vm.host} is not in the cluster; it has: "
                f"{', '.join(sorted(state.hosts)) or 'none'}",
                fix="fix the host name in the inventory"))
            continue
        for vgpu_type in vm.vgpus:
            if vgpu_type not in host.vgpu_types:
                offered = ", ".join(host.vgpu_types) or "none (is the NVIDIA host driver in?)"
                problems.append(Problem(
                    source, f"VM {vm.name} vgpus",
                    f"host {vm.host} does not offer vGPU type {vgpu_type}; it offers: {offered}",
                    fix="pick a profile the host offers, or enable MIG / install the host driver"))
        present = {g.pci_id for g in host.gpus}
        for device in vm.passthrough:
            if device.pci_id not in present:
                problems.append(Problem(
                    source, f"VM {vm.name} passthrough",
                    f"host {vm.host} has no NVIDIA GPU at {device.pci_id}; it has: "
                    f"{', '.join(sorted(present)) or 'none'}",
                    fix="fix pci_ids in the inventory"))
        nic = vm.rdma_nic
        if nic is not None and nic.pci_id not in host.pci_devices:
            problems.append(Problem(
                source, f"VM {vm.name} rdma_nic",
                f"host {vm.host} has no PCI device at {nic.pci_id} for the RDMA NIC",
                fix="fix the NIC's pci_id in the inventory's rdma_nics"))
    if problems:
        raise InputError(problems)


def check_addresses(desired: list[VmDesired], state: ClusterState, scenario: str,
                    source: str) -> None:
    """A planned guest IP that another VM (not this scenario's) already reports is refused:
    two guests with one address break both."""
    in_use = {vm.ip: vm.name for vm in state.vms.values()
              if vm.ip and not (vm.owned and vm.scenario == scenario)}
    problems = [
        Problem(source, f"VM {vm.name} ip",
                f"address {vm.network.ip} is already used by VM {in_use[vm.network.ip]}",
                fix="give the VM a free address (inventory network.static or ip_pool), or "
                    "destroy the other VM's scenario first")
        for vm in desired if vm.network and vm.network.ip in in_use
    ]
    if problems:
        raise InputError(problems)


EFI = "efi"
EFI_TEMPLATE_FIX = ("make an EFI template: a VM with firmware EFI (VM Options > Boot Options > "
                    "Firmware), the guest OS installed under it, VMware Tools and the guests' "
                    "SSH key, converted to a template; name it in placement.template")


def template_firmware(state: ClusterState) -> tuple[str, str] | None:
    """The placement template's name and firmware, or None without a template."""
    template = state.placement.template
    if template is None:
        return None
    found = next((vm for vm in state.vms.values() if vm.ref._moId == template._moId), None)
    return (found.name, found.firmware) if found else None


def check_firmware(changes: ChangeSet, state: ClusterState, source: str,
                   inventory_source: str) -> None:
    """vGPU VMs boot with EFI, and a guest installed under BIOS does not boot once its VM is
    switched to EFI: clones need an EFI template, and an existing VM is never switched."""
    problems: list[Problem] = []
    template = template_firmware(state)
    clones = any(Step.CLONE in c.steps for c in changes.changes)
    if clones and template is not None and template[1] != EFI:
        problems.append(Problem(
            inventory_source, "placement.template",
            f"template '{template[0]}' has {template[1]} firmware; vGPU and passthrough VMs "
            "need EFI, and a guest installed under BIOS does not boot once switched to EFI",
            fix=EFI_TEMPLATE_FIX))
    for change in changes.changes:
        have, want = change.actual, change.desired
        if have is not None and want is not None and have.firmware != want.firmware:
            problems.append(Problem(
                source, f"VM {change.name}",
                f"has {have.firmware} firmware, the plan wants {want.firmware}; vgpu does not "
                "switch the firmware under an installed guest",
                fix=f"destroy the scenario's VMs (vgpu destroy) and apply again from an "
                    f"{want.firmware.upper()} template"))
    if problems:
        raise InputError(problems)


def plan_apply(
    state: ClusterState, desired: list[VmDesired], scenario: str, source: str,
    inventory_source: str | None = None,
) -> ChangeSet:
    """The change set for apply, or InputError (nothing changed) for name clashes, requests
    the hosts cannot serve and a template or VM without EFI firmware. ``inventory_source``
    names the inventory file in a problem with the template (default: ``source``)."""
    check_desired(desired, state, source)
    check_addresses(desired, state, scenario, source)
    changes = plan_changes(desired, state.vms, scenario)
    check_firmware(changes, state, source, inventory_source or source)
    if changes.conflicts:
        raise InputError([
            Problem(source, f"VM {c.name}", c.reason,
                    fix="rename the scenario's VMs, or rename/remove the existing VM in vCenter "
                        "(vgpu never adopts a VM it did not create)")
            for c in changes.conflicts
        ])
    return changes


def plan_teardown(state: ClusterState, scenario: str) -> ChangeSet:
    return plan_destroy(state.vms, scenario)
