"""Pure: GPUs whose host mode rules out vGPUs. A GPU in passthrough (active in
``config.pciPassthruInfo``) or whose graphics type is not Shared Direct cannot carry a vGPU;
the planner sees it as held, so a vGPU scenario is placed on the other GPUs or refused with
the GPU named. MIG-backed vGPU needs ESXi 7.0 Update 2 (7.0.2) or later."""

from __future__ import annotations

import re

from vgpu.model.inventory import Inventory
from vgpu.model.plan import Plan
from vgpu.planner import HeldVgpu
from vgpu.vsphere.plan.from_plan import gpu_order
from vgpu.vsphere.read.facts import HostFacts

SHARED_DIRECT = "sharedDirect"
MIG_ESXI = (7, 0, 2)  # 7.0 Update 2: the first ESXi with MIG-backed vGPU


def esxi_version(version: str | None) -> tuple[int, ...]:
    """"7.0.2" -> (7, 0, 2); "7.0" -> (7, 0, 0); () when there is none."""
    parts = [int(p) for p in re.findall(r"\d+", version or "")[:3]]
    return tuple(parts + [0] * (3 - len(parts))) if parts else ()


def mig_esxi_problem(facts: HostFacts) -> str | None:
    """Why the host cannot run MIG-backed vGPUs for its ESXi version, or None."""
    if esxi_version(facts.version) >= MIG_ESXI:
        return None
    return (f"{facts.name} runs ESXi {facts.version or 'unknown'} build "
            f"{facts.build or 'unknown'}: MIG-backed vGPU needs ESXi 7.0 Update 2 (7.0.2) "
            "or later; upgrade the host or plan time-sliced vGPUs or passthrough")


def mig_esxi_problems(plan: Plan, hosts: dict[str, HostFacts]) -> list[str]:
    """Each host the plan gives MIG-backed vGPUs whose ESXi is older than 7.0 U2."""
    used = sorted({g.host for g in plan.gpus if g.mode == "mig"})
    return [p for name in used if name in hosts
            if (p := mig_esxi_problem(hosts[name]))]


def not_shared_direct(facts: HostFacts, pci: str) -> str | None:
    """Why the GPU cannot carry a vGPU, or None (also where the host does not say)."""
    if facts.passthrough_per_gpu.get(pci) == "active":
        return "in passthrough mode, not Shared Direct (vGPU)"
    graphics = facts.graphics_per_gpu.get(pci)
    if graphics is not None and graphics != SHARED_DIRECT:
        return f"graphics type {graphics}, not Shared Direct (vGPU)"
    return None


def vgpu_mode_holds(hosts: dict[str, HostFacts], inventory: Inventory | None,
                    taken: list[HeldVgpu]) -> list[HeldVgpu]:
    """A hold on every GPU not in Shared Direct mode that no VM holds already."""
    held = {(h.host, h.gpu_index) for h in taken}
    out: list[HeldVgpu] = []
    for name, facts in sorted(hosts.items()):
        for index, pci in enumerate(gpu_order(facts, inventory)):
            why = not_shared_direct(facts, pci)
            if why and (name, index) not in held:
                out.append(HeldVgpu(name, index, f"no VM: the GPU ({pci}) is {why}",
                                    "passthrough", "passthrough"))
    return out
