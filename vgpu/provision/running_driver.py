"""Pure: whether the NVIDIA driver a guest runs (what its nvidia-smi reports) runs under its
host's vGPU Manager (the host driver VIB), by NVIDIA's compatibility table
(vgpu.vsphere.desired.driver_compat). The inventory's intended guest driver is judged the
same way by the vSphere preflight; this judges what a guest really runs, which can differ
after a host upgrade until the guest's driver is changed. The VIB is the one vCenter
reports for the host the guest's VM runs on (vgpu.provision.host_drivers), else the
inventory's."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.vsphere.desired.driver_compat import compatible, guest_branches
from vgpu.vsphere.read.facts import driver_branch


@dataclass(frozen=True)
class RunningDriverProblem:
    message: str
    fix: str


def judge_running_driver(guest: str, running: str, host_vib: str,
                         declared: tuple[int, ...] = (),
                         host: str | None = None) -> RunningDriverProblem | None:
    """None when guest ``guest``'s running driver ``running`` runs under a host driver VIB
    ``host_vib`` (or a branch is unreadable), else the failure with its fix. ``host``: the
    ESXi host vCenter reports the guest on (its VIB read there); None: the VIB is the
    inventory's drivers.host_driver_version."""
    host_branch, guest_branch = driver_branch(host_vib), driver_branch(running)
    if host_branch is None or guest_branch is None:
        return None
    verdict = compatible(host_branch, guest_branch, declared)
    if verdict.ok:
        return None
    branches = "/".join(map(str, guest_branches(host_branch)))
    where = f"its host {host}'s" if host else "its host's"
    install = (f"install the branch-{guest_branch} host driver VIB on {host}" if host else
               f"install the branch-{guest_branch} host driver VIB on its host; "
               "drivers.host_driver_version names the VIB the host runs")
    return RunningDriverProblem(
        f"{guest} runs NVIDIA guest driver {running} (branch {guest_branch}), which "
        f"{where} vGPU Manager {host_vib} (branch {host_branch}) does not run: {verdict.why}",
        f"give {guest} a guest driver of branch {branches} (drivers.guest_driver, then "
        f"`vgpu provision` changes it in place), or {install}")
