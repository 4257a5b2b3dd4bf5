"""Pure: does each host the plan uses have the memory and logical CPUs for its VMs? vGPU
VMs reserve all their memory (a power-on that cannot reserve it fails), so the planned
VMs' memory, beside what the host's other powered-on VMs reserve and what ESXi keeps for
itself, must fit the host's memory; no VM may have more vCPUs than the host has logical
CPUs. Checked before apply changes anything, with the arithmetic in the refusal."""

from __future__ import annotations

from collections import defaultdict

from vgpu.model.plan import Plan, PlannedVM
from vgpu.vsphere.read.facts import HostFacts, VmActual

ESXI_RESERVED_GB = 12  # what ESXi itself (VMkernel, services) keeps of a host's memory
GB = 1024


def _gb(mb: int) -> str:
    return f"{mb / GB:g} GB"


def _vm_sizes(vms: list[PlannedVM]) -> str:
    """'7 VMs x 64 GB' or, with mixed sizes, '2 VMs x 64 GB + 1 VM x 32 GB'."""
    counts: dict[int, int] = defaultdict(int)
    for vm in vms:
        counts[vm.memory_mb] += 1
    return " + ".join(f"{n} VM{'s' if n != 1 else ''} x {_gb(mb)}"
                      for mb, n in sorted(counts.items(), reverse=True))


def memory_problem(host: HostFacts, planned: list[PlannedVM],
                   others: list[VmActual]) -> str | None:
    """Why the planned VMs' memory does not fit the host, or None (also when the host
    does not report its memory)."""
    if host.memory_bytes is None:
        return None
    host_mb = host.memory_bytes // (1024 * 1024)
    usable_mb = host_mb - ESXI_RESERVED_GB * GB
    held_mb = sum(vm.reserved_memory_mb for vm in others)
    wanted_mb = sum(vm.memory_mb for vm in planned)
    if wanted_mb + held_mb <= usable_mb:
        return None
    held = (f" + {_gb(held_mb)} reserved by {len(others)} other powered-on VM(s) "
            f"({', '.join(sorted(vm.name for vm in others))})" if held_mb else "")
    free_mb = max(usable_mb - held_mb, 0)
    largest = max(vm.memory_mb for vm in planned)
    fits = free_mb // largest
    per_vm = free_mb // len(planned) // GB
    lower = f"lower memory_gb to {per_vm} or less, or " if per_vm >= 1 else ""
    return (f"{host.name}: {_vm_sizes(planned)} = {_gb(wanted_mb)} reserved{held} > "
            f"{_gb(host_mb)} of host memory less {ESXI_RESERVED_GB} GB for ESXi; fit: "
            f"{fits} of these VMs fit ({_gb(free_mb)} free), or {lower}spread the VMs "
            "over more hosts")


def cpu_problem(host: HostFacts, planned: list[PlannedVM]) -> str | None:
    """Why a planned VM has more vCPUs than the host has logical CPUs, or None."""
    if host.cpu_threads is None:
        return None
    big = [vm for vm in planned if vm.vcpu > host.cpu_threads]
    if not big:
        return None
    names = ", ".join(f"{vm.name} ({vm.vcpu} vCPUs)" for vm in big)
    return (f"{host.name}: {names} > {host.cpu_threads} logical CPUs of the host "
            f"({host.cpu_cores or '?'} cores); fit: lower vcpu to {host.cpu_threads} "
            "or less")


def resource_problems(plan: Plan, hosts: dict[str, HostFacts],
                      vms: dict[str, VmActual]) -> list[str]:
    """Every host of the plan whose memory or logical CPUs its planned VMs exceed. The
    plan's own VMs that already exist count once, as planned."""
    planned_names = {vm.name for vm in plan.vms}
    by_host: dict[str, list[PlannedVM]] = defaultdict(list)
    for vm in plan.vms:
        by_host[vm.host].append(vm)
    problems: list[str] = []
    for name, planned in sorted(by_host.items()):
        host = hosts.get(name)
        if host is None:
            continue
        others = [vm for vm in vms.values() if vm.host == name and vm.powered_on
                  and not vm.is_template and vm.name not in planned_names]
        problems += [p for p in (memory_problem(host, planned, others),
                                 cpu_problem(host, planned)) if p]
    return problems


def resource_summary(plan: Plan, hosts: dict[str, HostFacts]) -> str:
    """What the plan takes of each host's memory and logical CPUs, for a passing check."""
    by_host: dict[str, list[PlannedVM]] = defaultdict(list)
    for vm in plan.vms:
        by_host[vm.host].append(vm)
    parts: list[str] = []
    for name, planned in sorted(by_host.items()):
        host = hosts.get(name)
        if host is None or host.memory_bytes is None:
            continue
        memory = _gb(sum(vm.memory_mb for vm in planned))
        vcpus = sum(vm.vcpu for vm in planned)
        parts.append(f"{name}: {memory} of {_gb(host.memory_bytes // (1024 * 1024))}, "
                     f"{vcpus} vCPUs on {host.cpu_threads or '?'} logical CPUs")
    return "; ".join(parts) or "the hosts report no memory size: not checked"
