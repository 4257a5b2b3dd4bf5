"""Did the upgrade leave the host's NVIDIA stack as it was? Read before a drained host
leaves maintenance mode, against what the drain saw: the NVIDIA host driver VIB present (and
on the intended branch), the same GPUs, vGPU types offered (the vGPU manager loaded) and
those vgpu's VMs use among them, Shared Direct graphics and the per-GPU vGPU mode as they
were. A build that changed while any of these broke would put VMs on a host that cannot run
them: the host stays in maintenance mode and each finding names its fix.

ECC mode and a pending MIG mode change are not in the vSphere API: `nvidia-smi -q` on the
host shows them (said in docs/revalidate.md)."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.vsphere.desired.drainrecord import DrainRecord
from vgpu.vsphere.read.facts import HostFacts

SHARED_DIRECT = "sharedDirect"
VSGA = "shared"


@dataclass(frozen=True)
class StackFinding:
    reason: str
    fix: str


def vib_fix(host: str, image_managed: bool | None) -> str:
    """How to put the NVIDIA host driver back: on a vLCM image-managed cluster through the
    image (a VIB installed by hand makes the host non-compliant and the next remediation
    removes it), else with esxcli."""
    image = ("add the NVIDIA AI Enterprise host driver component to the cluster's image "
             "(vSphere Client: the cluster, Updates, Image, Edit) and remediate "
             f"{host}")
    esxcli = (f"install the NVIDIA host driver VIB on {host} (`esxcli software vib install "
              "-d <bundle.zip>`) and reboot it")
    if image_managed:
        return image
    if image_managed is False:
        return esxcli
    return (f"on a cluster managed with an image (vLCM): {image}; on one managed with "
            f"baselines: {esxcli}")


def stack_findings(record: DrainRecord, now: HostFacts, *, intended_branch: int | None,
                   image_managed: bool | None) -> list[StackFinding]:
    """Why the host's GPU stack is not fit to leave maintenance mode; [] when it is."""
    out: list[StackFinding] = []
    host = now.name
    driver = now.host_driver
    if record.host_driver and driver is None and now.host_driver_note \
            and now.host_driver_note.startswith("no NVIDIA driver VIB"):
        out.append(StackFinding(
            f"host {host} has no NVIDIA host driver VIB any more (it had {record.host_driver}"
            "): the new image has no NVIDIA component", vib_fix(host, image_managed)))
    elif driver is not None and intended_branch is not None \
            and driver.branch != intended_branch:
        out.append(StackFinding(
            f"host {host} runs NVIDIA host driver {driver.version}, branch {driver.branch}, "
            f"not the intended branch {intended_branch} (inventory "
            "drivers.host_driver_version)", vib_fix(host, image_managed)))
    gone = sorted(set(record.gpus) - {g.pci_id for g in now.gpus})
    if gone:
        out.append(StackFinding(
            f"host {host} no longer shows GPU(s) {', '.join(gone)} it had at the drain",
            f"check the GPUs of {host} (`lspci | grep -i nvidia` on the host, the "
            "server's BMC); a GPU that fell off the bus needs a cold boot"))
    if record.vgpu_types and not now.vgpu_types and driver is not None:
        out.append(StackFinding(
            f"host {host} offers no vGPU type although the NVIDIA VIB {driver.version} is "
            "installed: the vGPU manager did not load",
            f"run `nvidia-smi` on {host} (it fails while the module is not loaded), check "
            "`vmkload_mod -l | grep nvidia`, then reboot it"))
    elif now.vgpu_types:
        missing = sorted(set(record.vgpu_types_in_use) - set(now.vgpu_types))
        if missing:
            out.append(StackFinding(
                f"host {host} no longer offers vGPU type(s) {', '.join(missing)} that "
                "vgpu's VMs on it used", f"check the MIG mode and the vGPU manager on "
                f"{host} (`nvidia-smi -q`); the scenario's VMs cannot power on there"))
    for pci, before in sorted(record.graphics.items()):
        after = now.graphics_active_per_gpu.get(pci)
        if before == SHARED_DIRECT and after is not None and after != SHARED_DIRECT:
            out.append(StackFinding(
                f"GPU {pci} of host {host} is in graphics mode {after}, not Shared Direct "
                "as at the drain", f"set it to Shared Direct (vSphere Client: {host}, "
                "Configure, Graphics Devices, Edit) and reboot the host"))
    for pci, before in sorted(record.vgpu_modes.items()):
        after = now.vgpu_mode_per_gpu.get(pci)
        if after is not None and after != before:
            out.append(StackFinding(
                f"GPU {pci} of host {host} is in vGPU mode {after}, not {before} as at the "
                "drain (MIG mode lost or changed)", f"set MIG mode back on {host} "
                "(`nvidia-smi -i <gpu> -mig 1`, then a GPU reset or reboot)"))
    return out


def needs_xorg(facts: HostFacts) -> bool:
    """Xorg is needed only for vSGA (graphics type shared): GPUs in Shared Direct (vGPU)
    or passthrough run without it since vSphere 7.0 U1, and on compute GPUs (A100,
    H100) it often does not start at all."""
    return VSGA in set(facts.graphics_active_per_gpu.values())
