"""Which VMs are this lab's to change or delete. A vCenter is shared: other teams' and other
labs' VMs may carry the same names in other folders and clusters, and a clone made for
debugging copies every mark. A VM is vgpu's only when all of these hold:

- it is in the lab's VM folder (placement.folder, else the datacenter's root VM folder) and
  on a host of the lab's cluster;
- it carries the owner mark and the lab's mark (``vgpu.lab``);
- its ``config.instanceUuid`` is the one vgpu wrote into it (``vgpu.instance_uuid``) or
  recorded locally when it created it (vgpu.vsphere.desired.instances): a clone has another.

Every other VM is still read (its vGPUs hold capacity, its address is in use) but never
changed, and names outside the lab's folder are kept apart from the lab's own."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from vgpu.vsphere.connect.connection import VmPlacementObjects
from vgpu.vsphere.desired.vm import INSTANCE_KEY, LAB_KEY, OWNER_KEY, OWNER_VALUE
from vgpu.vsphere.read.facts import VmActual


@dataclass(frozen=True)
class LabScope:
    """Where a lab's VMs live: one VM folder and the hosts of one cluster."""

    lab: str
    folder: str  # managed-object id
    folder_name: str
    hosts: frozenset[str]
    cluster_name: str | None


def lab_scope(placement: VmPlacementObjects) -> LabScope:
    folder = placement.folder
    cluster = placement.cluster
    return LabScope(lab=placement.lab, folder=folder._moId, folder_name=str(folder.name),
                    hosts=frozenset(placement.hosts),
                    cluster_name=str(cluster.name) if cluster is not None else None)


def outside_scope(vm: VmActual, scope: LabScope) -> str | None:
    """Why ``vm`` is outside the lab's folder or cluster, or None."""
    if vm.folder != scope.folder:
        return f"it is outside the lab's VM folder {scope.folder_name}"
    if vm.host is not None and vm.host not in scope.hosts:
        where = f"cluster {scope.cluster_name}" if scope.cluster_name else "datacenter"
        return f"it runs on host {vm.host}, outside the lab's {where}"
    return None


def why_not_mine(vm: VmActual, scope: LabScope, recorded: set[str]) -> str | None:
    """None when ``vm`` is this lab's (see the module), else the reason it is not."""
    marks = vm.extra_config
    if marks.get(OWNER_KEY) != OWNER_VALUE:
        return "it was not created by vgpu (no vgpu.owner mark)"
    outside = outside_scope(vm, scope)
    if outside:
        return outside
    lab = marks.get(LAB_KEY, "")
    if lab != scope.lab:
        return (f"it belongs to lab '{lab}'" if lab
                else "it carries no vgpu.lab mark (another lab's, or made before labs)")
    uuid = vm.instance_uuid
    if uuid and (marks.get(INSTANCE_KEY) == uuid or uuid in recorded):
        return None
    return (f"it is a copy of a vgpu VM: its instanceUuid {uuid or '(none)'} is not the one "
            "vgpu recorded when it created the VM (marks copied by a clone are not ownership)")


def lab_view(vms: Iterable[VmActual], scope: LabScope,
             recorded: set[str]) -> dict[str, VmActual]:
    """Every VM with its verdict (``VmActual.disowned``): the lab's folder and cluster by
    name, every other VM under ``name [moId]`` so that its name never stands for the lab's."""
    view: dict[str, VmActual] = {}
    for vm in vms:
        vm.disowned = why_not_mine(vm, scope, recorded)
        inside = outside_scope(vm, scope) is None
        view[vm.name if inside else f"{vm.name} [{vm.ref._moId}]"] = vm
    return view
