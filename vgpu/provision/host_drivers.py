"""Which host driver VIB each vGPU guest's running driver is judged against: the one vCenter
reports for the host the guest's VM runs on now (vgpu.vsphere.plan.guest_hosts), so that during
a rolling upgrade a guest on the upgraded host is judged against the new VIB and one on
another host against the old. The inventory's drivers.host_driver_version stays only where
vCenter cannot be asked or does not know the VM's host or VIB, and the notes say so."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from vgpu import stepnames
from vgpu.errors import VgpuError
from vgpu.model.inventory import Inventory
from vgpu.provision.fanout import Job
from vgpu.vsphere.plan.guest_hosts import GuestHost, ask_guest_hosts


def _judged(job: Job) -> bool:
    """A guest whose driver runs under a vGPU Manager (not a passthrough or bare-metal
    one's data-center driver)."""
    req = job.requirements
    return req.driver_kind == "vgpu-guest" and stepnames.NVIDIA_DRIVER in req.steps


def with_guest_hosts(jobs: list[Job], found: dict[str, GuestHost],
                     inventory_vib: str | None) -> tuple[list[Job], list[str]]:
    """Each vGPU guest's job judged against the VIB of the host ``found`` names for it."""
    out, notes = [], []
    fallback = f"drivers.host_driver_version {inventory_vib}" if inventory_vib \
        else "no VIB (drivers.host_driver_version is not set): its running driver is not judged"
    for job in jobs:
        where = found.get(job.target.name)
        if not _judged(job):
            out.append(job)
        elif where is None or where.vib is None:
            why = "vCenter lists no VM of that name" if where is None else \
                f"host {where.host}: {where.note or 'no VIB read'}"
            notes.append(f"{job.target.name}: the host driver VIB is not known ({why}); its "
                         f"running driver is judged against {fallback}")
            out.append(job)
        else:
            out.append(dataclasses.replace(job, requirements=dataclasses.replace(
                job.requirements, host_driver_version=where.vib, host_name=where.host)))
    return out, notes


def judge_against_guest_hosts(jobs: list[Job], inventory: Inventory,
                              inventory_path: Path) -> tuple[list[Job], list[str]]:
    """The jobs with each vGPU guest's host VIB as vCenter reports it, and notes for what
    falls back to the inventory's drivers.host_driver_version."""
    judged = [job.target.name for job in jobs if _judged(job)]
    if not judged:
        return jobs, []
    vib = inventory.drivers.host_driver_version
    fallback = f"drivers.host_driver_version {vib} from {inventory_path}" if vib \
        else "nothing (drivers.host_driver_version is not set either)"
    if inventory.vcenter is None:
        return jobs, [f"the inventory has no vCenter to ask for each guest's host driver VIB: "
                      f"running guest drivers are judged against {fallback}"]
    try:
        found = ask_guest_hosts(inventory, inventory_path, judged)
    except VgpuError as exc:
        return jobs, [f"vCenter could not be asked for each guest's host driver VIB ({exc}): "
                      f"running guest drivers are judged against {fallback}"]
    return with_guest_hosts(jobs, found, vib)
