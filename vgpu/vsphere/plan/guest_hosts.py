"""The ESXi host each guest VM runs on now, and that host's NVIDIA host driver VIB (the
vGPU Manager), as vCenter reports them: a guest's running driver is judged against the VIB
of the host it is on, which differs between hosts during a rolling upgrade and can differ
from the plan where DRS or a person moved the VM."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from vgpu.model.inventory import Inventory
from vgpu.vsphere.connect.connection import Session, VmPlacementNames
from vgpu.vsphere.plan.reconcile import read_state
from vgpu.vsphere.read.facts import read_host_driver


@dataclass(frozen=True)
class GuestHost:
    """Where one guest VM runs: its host, the host's VIB version (None: not read, with
    ``note`` saying why)."""

    vm: str
    host: str | None
    vib: str | None
    note: str | None = None


def read_guest_hosts(session: Session, names: VmPlacementNames,
                     vms: Collection[str]) -> dict[str, GuestHost]:
    """``vms`` by name -> where each runs; a VM vCenter does not list is left out. One
    FetchSoftwarePackages call per host that runs one of them."""
    state = read_state(session, names)
    found = {name: state.vms[name] for name in vms if name in state.vms}
    hosts = {vm.host for vm in found.values() if vm.host is not None}
    for host in hosts:
        if host in state.hosts:
            read_host_driver(state.hosts[host])
    guests = {}
    for name, vm in found.items():
        facts = state.hosts.get(vm.host) if vm.host is not None else None
        if facts is None:
            guests[name] = GuestHost(name, vm.host, None, "vCenter names no host for it")
        elif facts.host_driver is None:
            guests[name] = GuestHost(name, facts.name, None, facts.host_driver_note)
        else:
            guests[name] = GuestHost(name, facts.name, facts.host_driver.version)
    return guests


def ask_guest_hosts(inventory: Inventory, inventory_path: Path,
                    vms: Collection[str]) -> dict[str, GuestHost]:
    """Log in to the inventory's vCenter and read where ``vms`` run (RemoteError when
    vCenter cannot be reached)."""
    from vgpu.vsphere.connect.connection import connect
    from vgpu.vsphere.connect.from_inventory import placement_from_inventory, target_from_inventory

    with connect(target_from_inventory(inventory, inventory_path)) as session:
        return read_guest_hosts(session, placement_from_inventory(inventory, inventory_path),
                                vms)
