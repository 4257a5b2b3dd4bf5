"""Which GPU each vGPU VM sits on.

ESXi picks a vGPU VM's GPU when the VM powers on, by the host's
``HostGraphicsConfig.sharedPassthruAssignmentPolicy``: ``performance`` (the default) takes
the GPU with the fewest VMs, so VMs a plan puts on one GPU are spread; ``consolidation``
fills a GPU first. ``plan_policy_changes`` finds the hosts where the plan shares a GPU and
the policy is not consolidation; ``apply_policy_changes`` sets it through the host's
HostGraphicsManager. After power-on, ``placement_mismatches`` compares the plan with where
ESXi really put each VM (``HostGraphicsInfo.vm`` lists the powered-on VMs per GPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyVmomi import vim, vmodl

from vgpu.errors import RemoteError
from vgpu.model.inventory import Inventory
from vgpu.model.plan import Plan
from vgpu.vsphere.desired.assignment import CONSOLIDATION, ESXCLI_CONSOLIDATION, shared_gpus
from vgpu.vsphere.plan.from_plan import gpu_order
from vgpu.vsphere.read.facts import HostFacts, VmActual


@dataclass(frozen=True)
class PolicyChange:
    """A host whose assignment policy must become consolidation for the plan."""

    host: str
    current: str | None
    shared: tuple[str, ...]  # the GPUs that need it, as shared_gpus names them
    manager: Any = None
    config: Any = None

    def setting(self) -> str:
        return f"GPU assignment policy {self.current or 'unknown'} -> {CONSOLIDATION}"

    def describe(self) -> str:
        return f"host {self.host}: {self.setting()} (the plan shares {', '.join(self.shared)})"


def plan_policy_changes(plan: Plan, hosts: dict[str, HostFacts]) -> list[PolicyChange]:
    changes: list[PolicyChange] = []
    for host, gpus in sorted(shared_gpus(plan).items()):
        facts = hosts.get(host)
        if facts is None or facts.assignment_policy == CONSOLIDATION:
            continue
        changes.append(PolicyChange(host, facts.assignment_policy, tuple(gpus),
                                    facts.graphics_manager, facts.graphics_config))
    return changes


def _consolidation_config(current: Any) -> Any:
    """The host's graphics config with only the assignment policy changed (the call
    replaces the whole config)."""
    return vim.host.GraphicsConfig(
        hostDefaultGraphicsType=getattr(current, "hostDefaultGraphicsType", None)
        or "sharedDirect",
        sharedPassthruAssignmentPolicy=CONSOLIDATION,
        deviceType=list(getattr(current, "deviceType", None) or []))


def apply_policy_changes(changes: list[PolicyChange]) -> list[str]:
    """Set consolidation on each host (HostGraphicsManager.UpdateGraphicsConfig);
    RemoteError names every host that refused, with the esxcli command to run there."""
    done: list[str] = []
    failures: list[str] = []
    for change in changes:
        if change.manager is None:
            failures.append(f"{change.host}: the host has no graphics manager; run on the "
                            f"host: {ESXCLI_CONSOLIDATION}")
            continue
        try:
            change.manager.UpdateGraphicsConfig(config=_consolidation_config(change.config))
        except vmodl.MethodFault as exc:
            why = getattr(exc, "msg", None) or type(exc).__name__
            failures.append(f"{change.host}: setting the GPU assignment policy failed ({why}); "
                            f"run on the host: {ESXCLI_CONSOLIDATION}")
            continue
        done.append(f"{change.host}: GPU assignment policy = {CONSOLIDATION}")
    if failures:
        raise RemoteError("GPU assignment policy not set:\n  " + "\n  ".join(failures))
    return done


@dataclass(frozen=True)
class PlacementMismatch:
    """A powered-on VM that ESXi did not put with its planned GPU-mates."""

    vm: str
    host: str
    planned: tuple[str, ...]
    actual: tuple[str, ...]

    def describe(self) -> str:
        actual = ", ".join(self.actual) or "no GPU the host lists"
        return (f"VM {self.vm}: planned on {', '.join(self.planned)} of {self.host}, "
                f"ESXi put it on {actual}")


def _gpu_names(pcis: set[str], order: list[str]) -> tuple[str, ...]:
    return tuple(f"GPU {order.index(p)} ({p})" if p in order else p
                 for p in sorted(pcis, key=lambda p: (p not in order, order.index(p)
                                                      if p in order else 0, p)))


def actual_gpus(vm_name: str, facts: HostFacts) -> set[str]:
    """The GPUs (PCI ids) the host lists the VM on."""
    return {pci for pci, names in facts.vms_per_gpu.items() if vm_name in names}


def placement_mismatches(plan: Plan, inventory: Inventory | None,
                         hosts: dict[str, HostFacts],
                         vms: dict[str, VmActual]) -> list[PlacementMismatch]:
    """Each powered-on vGPU VM of the plan that does not share its GPU the way the plan
    says: the VMs planned on one GPU must sit together on one GPU, and the VMs of two
    planned GPUs on two different GPUs. Which physical GPU a group lands on is ESXi's
    numbering (other tenants, PCI order) and is not held against the plan."""
    groups: dict[tuple[str, frozenset[str]], list[tuple[str, frozenset[str]]]] = {}
    orders: dict[str, list[str]] = {}
    for planned_vm in plan.vms:
        facts = hosts.get(planned_vm.host)
        actual_vm = vms.get(planned_vm.name)
        if facts is None or actual_vm is None or not actual_vm.powered_on:
            continue
        order = orders.setdefault(planned_vm.host, gpu_order(facts, inventory))
        planned = frozenset(order[v.gpu_index] for v in planned_vm.vgpus
                            if v.kind != "passthrough" and v.gpu_index < len(order))
        if planned:
            actual = frozenset(actual_gpus(planned_vm.name, facts))
            groups.setdefault((planned_vm.host, planned), []).append((planned_vm.name, actual))
    claimed: dict[tuple[str, frozenset[str]], frozenset[str]] = {}
    out: list[PlacementMismatch] = []
    for (host, planned), members in sorted(groups.items(), key=lambda g: sorted(g[0][1])):
        order = orders[host]
        landed = [actual for _, actual in members]
        # The group's home: where most of it landed, the planned GPUs on a tie.
        home = max(set(landed), key=lambda a: (landed.count(a), a == planned))
        taken = any(home == other and key != (host, planned) and key[0] == host
                    for key, other in claimed.items())
        claimed[(host, planned)] = home
        for name, actual in members:
            if not actual or actual != home or taken:
                out.append(PlacementMismatch(name, host, _gpu_names(set(planned), order),
                                             _gpu_names(set(actual), order)))
    return out
