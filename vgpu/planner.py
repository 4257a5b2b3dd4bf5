"""Scenario + inventory -> Plan. Pure: no network, no files.

Placement rules (from NVIDIA's vGPU and MIG documentation):
- a whole-GPU passthrough VM owns its GPU;
- a GPU in time-sliced mode hosts vGPUs of one type only, up to framebuffer / type size;
- a GPU in MIG mode hosts MIG-backed vGPUs placed by the MIG solver (vgpu.mig);
- all vGPUs of one VM are on one host; VMs marked ``spread`` go to distinct hosts.
Hosts are filled in inventory order, so plans are deterministic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from vgpu import mig, stepnames
from vgpu.container.images import HarnessBase, UnknownDriverBranch, harness_base
from vgpu.errors import PlanError, Problem
from vgpu.model import llm_memory
from vgpu.model.inventory import BareMetalHost, EsxiHost, GpuInventory, Inventory
from vgpu.model.load import vgpu_requests
from vgpu.model.plan import (
    BenchItem,
    GpuMode,
    Plan,
    PlannedGpu,
    PlannedRdmaNic,
    PlannedSlice,
    PlannedVgpu,
    PlannedVM,
)
from vgpu.model.scenario import InferenceWorkload, Scenario, TrainingWorkload
from vgpu.model.vgpu_request import VgpuRequest


@dataclass(frozen=True)
class HeldVgpu:
    """A vGPU already held on a host GPU by a VM vgpu does not own (read by preflight)."""

    host: str
    gpu_index: int
    vm: str
    kind: str  # mig | timesliced | passthrough
    label: str  # MIG profile name or time-sliced type


@dataclass
class _GpuState:
    host: str
    index: int
    model: mig.GpuModel
    pci_id: str | None
    board: str = ""  # the vGPU board code; the model's default board when empty
    mode: str = "unused"
    timesliced_type: str | None = None
    tenants: list[str] = field(default_factory=list)
    held: list[HeldVgpu] = field(default_factory=list)

    @property
    def free(self) -> bool:
        return self.mode == "unused" and not self.held

    @property
    def board_code(self) -> str:
        return self.board or self.model.board


@dataclass
class _HostState:
    name: str
    gpus: list[_GpuState]
    mig_requests: list[tuple[str, int, mig.MigProfile]] = field(default_factory=list)
    mig_compute_requested: int = 0  # compute slices of mig_requests, kept as they grow
    vms: list[str] = field(default_factory=list)
    groups: set[str] = field(default_factory=set)
    # GPU index pairs bridged by NVLink (inventory nvlink_pairs), taken first by a P2P VM
    # that passes two GPUs through
    nvlink_pairs: list[tuple[int, int]] = field(default_factory=list)


def _pow2_at_least(value: int) -> int:
    out = 1
    while out < value:
        out *= 2
    return out


def mmio_size_gb(requests: list[VgpuRequest]) -> int:
    """64-bit MMIO window for a VM. Passthrough: NVIDIA's size per GPU model. vGPU: the next
    power of two at or above twice the framebuffer, at least 64 (the lab study used 64 with
    one 1g.10gb slice; a 7g.80gb gives 256, the full A100 80GB value)."""
    total = 0
    for r in requests:
        if r.kind == "passthrough":
            total += r.gpu.mmio_size_gb
        else:
            total += max(64, _pow2_at_least(2 * r.framebuffer_gb))
    return _pow2_at_least(total) if total else 0


def vm_extra_config(scenario: Scenario, requests: list[VgpuRequest]) -> dict[str, str]:
    settings = scenario.vm_settings
    cfg: dict[str, str] = {}
    if requests:
        cfg["pciPassthru.use64bitMMIO"] = "TRUE"
        cfg["pciPassthru.64bitMMIOSizeGB"] = str(settings.mmio_size_gb or mmio_size_gb(requests))
    if settings.p2p:
        cfg["pciPassthru.allowP2P"] = "TRUE"
        cfg["pciPassthru.RelaxACSforP2P"] = "TRUE"
    if settings.enable_uvm:
        for n, r in enumerate(requests):
            if r.kind != "passthrough":
                cfg[f"pciPassthru{n}.cfg.enable_uvm"] = "1"
    for ats in settings.ats:
        cfg.update(ats.vm_extra_config)
    cfg.update(settings.extra_config)
    return cfg


def guest_steps(scenario: Scenario) -> list[str]:
    g = scenario.guest
    steps = [stepnames.OS_FACTS]
    if g.base_packages:
        steps.append(stepnames.BASE_PACKAGES)
    if g.container_runtime != "none":
        steps.append(stepnames.CONTAINER_RUNTIMES[g.container_runtime])
    if g.driver != "none":
        steps.append(stepnames.NVIDIA_DRIVER)
        if g.container_runtime == "docker":
            steps.append(stepnames.CONTAINER_TOOLKIT)
    if g.licensing and g.driver == "vgpu-guest" and scenario.platform == "vsphere":
        steps.append(stepnames.VGPU_LICENSING)
    if g.passwordless_ssh:
        steps.append(stepnames.PASSWORDLESS_SSH)
    container = g.effective_runtime == "container"
    steps.append(stepnames.HARNESS_IMAGE if container else stepnames.NODE_HARNESS)
    if not container and any(isinstance(w, TrainingWorkload) and w.comm_backend == "mpi"
                             for w in scenario.workloads):
        steps.append(stepnames.MPI_RUNTIME)  # into the harness venv, so after it
    steps.append(stepnames.VERIFY_GPU)
    if container and g.driver != "none":
        steps.append(stepnames.GPU_PROBE)
    return steps


def _host_states(scenario: Scenario, inventory: Inventory | None,
                 held: list[HeldVgpu], notes: list[str]) -> list[_HostState]:
    model = scenario.gpu_model
    sources: list[EsxiHost | BareMetalHost]
    if inventory is None:
        needed = _gpus_needed(scenario)
        n_hosts = max([spec.count for spec in scenario.vms if spec.spread] or [1])
        if n_hosts == 1:
            notes.append(f"no inventory: assuming one host with {needed} x {model.key}")
        else:
            needed = max(1, -(-needed // n_hosts))
            notes.append(f"no inventory: assuming {n_hosts} hosts with {needed} x "
                         f"{model.key} each")
        names = [f"host-{k}" for k in range(1, n_hosts + 1)]
        return [_HostState(n, [_GpuState(n, i, model, None) for i in range(needed)])
                for n in names]
    sources = list(inventory.bare_metal if scenario.platform == "bare-metal"
                   else inventory.hosts)
    hosts: list[_HostState] = []
    for src in sources:
        gpus = _gpu_list(src.name, src.gpus, model)
        if isinstance(src, BareMetalHost) and src.is_local and not src.gpus:
            needed = _gpus_needed(scenario)
            notes.append(f"{src.name}: this machine lists no GPUs in the inventory; planning "
                         f"{needed} x {model.key} (bench reads the real devices from NVML)")
            gpus = [_GpuState(src.name, i, model, None) for i in range(needed)]
        for h in held:
            if h.host == src.name and h.gpu_index < len(gpus):
                gpus[h.gpu_index].held.append(h)
        pairs = _nvlink_pairs(src.gpus) if scenario.vm_settings.p2p else []
        hosts.append(_HostState(src.name, gpus, nvlink_pairs=pairs))
    return hosts


def _nvlink_pairs(gpus: list[GpuInventory]) -> list[tuple[int, int]]:
    """The inventory's NVLink pairs as host GPU indexes (each entry's pairs count from
    that entry's first GPU)."""
    out: list[tuple[int, int]] = []
    offset = 0
    for g in gpus:
        out += [(offset + min(a, b), offset + max(a, b)) for a, b in g.nvlink_pairs]
        offset += g.count
    return out


def _whole_gpus(host: _HostState, count: int) -> list[_GpuState] | None:
    """Free GPUs for ``count`` passthrough GPUs: an NVLink-bridged pair for two where the
    host has a free one, else the first free ones."""
    free = [g for g in host.gpus if g.free]
    if len(free) < count:
        return None
    if count == 2:
        by_index = {g.index: g for g in free}
        for a, b in host.nvlink_pairs:
            if a in by_index and b in by_index:
                return [by_index[a], by_index[b]]
    return free[:count]


def _gpu_list(host: str, gpus: list[GpuInventory], model: mig.GpuModel) -> list[_GpuState]:
    out: list[_GpuState] = []
    index = 0
    for g in gpus:
        for k in range(g.count):
            if g.gpu.key == model.key:
                pci = g.pci_ids[k] if g.pci_ids else None
                out.append(_GpuState(host, index, model, pci,
                                     board=model.board_for_form_factor(g.form_factor)))
            index += 1
    return out


def _gpus_needed(scenario: Scenario) -> int:
    reqs = [r for rs in vgpu_requests(scenario).values() for r in rs]
    whole = sum(r.kind == "passthrough" for r in reqs)
    sliced: dict[str, int] = {}
    for r in reqs:
        if r.kind == "timesliced" and r.timesliced_type:
            sliced[r.timesliced_type] = sliced.get(r.timesliced_type, 0) + 1
    ts_gpus = sum(-(-n // (scenario.gpu_model.memory_gb // int(t.rsplit("-", 1)[1][:-1])))
                  for t, n in sliced.items())
    profiles = [r.profile for r in reqs if r.kind == "mig" and r.profile]
    mig_gpus = 0
    if profiles:
        mig_gpus = 1
        while not mig.is_placeable(scenario.gpu_model, profiles, num_gpus=mig_gpus):
            mig_gpus += 1
            if mig_gpus > 64:
                break
    return max(1, whole + ts_gpus + mig_gpus)


def _held_profiles(gpu: _GpuState) -> list[mig.MigProfile]:
    return [gpu.model.profile(h.label) for h in gpu.held if h.kind == "mig"]


def _mig_gpus(host: _HostState) -> list[_GpuState]:
    return [g for g in host.gpus if g.mode in {"unused", "mig"}
            and all(h.kind == "mig" for h in g.held)]


def _try_place_mig(host: _HostState, vm: str, profiles: list[mig.MigProfile]) -> bool:
    gpus = _mig_gpus(host)
    if not gpus:
        return False
    free = sum(g.model.compute_slices - sum(p.compute_slices for p in _held_profiles(g))
               for g in gpus)
    if host.mig_compute_requested + sum(p.compute_slices for p in profiles) > free:
        return False  # a full host, rejected without searching
    wanted = [p for _, _, p in host.mig_requests] + profiles
    return _solve_host(host, gpus, wanted) is not None


def _solve_host(host: _HostState, gpus: list[_GpuState],
                wanted: list[mig.MigProfile]) -> list[mig.MigPlacement] | None:
    """Place held instances (pinned to their GPU) and wanted ones together."""
    model = gpus[0].model
    held_sets = [_held_profiles(g) for g in gpus]
    occupied: list[mig.MigPlacement] = []
    for k, profiles in enumerate(held_sets):
        if not profiles:
            continue
        held = mig.place(model, profiles)
        if held is None:
            return None
        occupied += [mig.MigPlacement(p.profile, p.start, k, owner="held") for p in held]
    placements = mig.place(model, wanted, num_gpus=len(gpus), occupied=occupied)
    if placements is None:
        return None
    return [*placements, *occupied]


def _fits_timesliced(gpu: _GpuState, vgpu_type: str) -> bool:
    size = int(vgpu_type.rsplit("-", 1)[1][:-1])
    capacity = gpu.model.memory_gb // size
    # A held type is read from the host under the GPU's own board code: compare sizes.
    held_types = {h.label.split("-", 1)[-1] for h in gpu.held}
    if gpu.held and (any(h.kind != "timesliced" for h in gpu.held)
                     or held_types != {vgpu_type.split("-", 1)[-1]}):
        return False
    if gpu.mode == "unused":
        return len(gpu.held) < capacity
    return (gpu.mode == "timesliced" and gpu.timesliced_type == vgpu_type
            and len(gpu.tenants) + len(gpu.held) < capacity)


def _assign_vm(host: _HostState, vm: str, reqs: list[VgpuRequest]) -> bool:
    """Try to put one VM on one host; on success the host state is updated."""
    whole = [r for r in reqs if r.kind == "passthrough"]
    sliced = [r for r in reqs if r.kind == "timesliced"]
    profiles = [r.profile for r in reqs if r.kind == "mig" and r.profile]
    taken = _whole_gpus(host, len(whole))
    if taken is None:
        return False
    ts_gpus: list[_GpuState] = []
    for r in sliced:
        assert r.timesliced_type
        candidates = [g for g in host.gpus if g not in taken and g not in ts_gpus
                      and _fits_timesliced(g, r.timesliced_type)]
        if not candidates:
            return False
        ts_gpus.append(candidates[0])
    if profiles:
        saved = [(g.mode) for g in host.gpus]
        for g in taken:
            g.mode = "passthrough"
        ok = _try_place_mig(host, vm, profiles)
        for g, mode in zip(host.gpus, saved, strict=True):
            g.mode = mode
        if not ok:
            return False
    for g in taken:
        g.mode = "passthrough"
        g.tenants.append(vm)
    for g, r in zip(ts_gpus, sliced, strict=True):
        g.mode = "timesliced"
        g.timesliced_type = r.timesliced_type
        g.tenants.append(vm)
    for k, p in enumerate(profiles):
        host.mig_requests.append((vm, k, p))
        host.mig_compute_requested += p.compute_slices
    host.vms.append(vm)
    return True


def _first_fit(candidates: list[_HostState], vm: str, reqs: list[VgpuRequest],
               refused: set[tuple[str, tuple[str, ...]]],
               shape: tuple[str, ...]) -> _HostState | None:
    """The first host that takes the VM; the hosts that refuse it are remembered."""
    for host in candidates:
        if _assign_vm(host, vm, reqs):
            return host
        refused.add((host.name, shape))
    return None


def build_plan(scenario: Scenario, inventory: Inventory | None = None, *,
               held: list[HeldVgpu] | None = None, inventory_name: str | None = None,
               unavailable: dict[str, str] | None = None, pin_host: str | None = None) -> Plan:
    """``unavailable`` maps hosts that must not get VMs (vCenter has them in maintenance
    mode) to the reason; they stay in the plan's host list, unused. ``pin_host`` puts
    every VM on that one host (the host an upgrade is proved on) or refuses the plan."""
    unavailable = unavailable or {}
    notes = [f"host {name} is {why}: not used" for name, why in sorted(unavailable.items())]
    model = scenario.gpu_model
    if model.placements_assumed:
        notes.append(f"{model.key}: MIG placements assumed equal to H100's (no published "
                     "capture); check with `vgpu mig verify-catalogue` on the host")
    if scenario.mig_parted is not None:
        notes.append(f"instances from mig-parted config '{scenario.mig_parted.config}' in "
                     f"{scenario.mig_parted.file}: one per MIG device or whole GPU")
    hosts = _host_states(scenario, inventory, held or [], notes)
    if not hosts or not any(h.gpus for h in hosts):
        where = "bare_metal" if scenario.platform == "bare-metal" else "hosts"
        raise PlanError([Problem(_inventory_file(inventory, inventory_name), where,
                                 f"no host has a {model.key} GPU",
                                 fix=f"add a host with gpus: [{{model: {model.key}}}]")])
    if pin_host is not None:
        _check_pin(scenario, pin_host, hosts, unavailable, inventory, inventory_name)
    requests = vgpu_requests(scenario)
    problems: list[Problem] = []
    placed: dict[str, _HostState] = {}
    # A host only fills up: once it refuses a VM's set of vGPUs, it refuses it again.
    refused: set[tuple[str, tuple[str, ...]]] = set()
    for spec in scenario.vms:
        used_by_group: set[str] = set()
        for name in spec.names():
            shape = tuple(sorted(r.label for r in requests[name]))
            wanted_host = pin_host or spec.host
            candidates = [h for h in hosts if wanted_host in (None, h.name)
                          and h.name not in unavailable and (h.name, shape) not in refused
                          and not (spec.spread and h.name in used_by_group)]
            host = _first_fit(candidates, name, requests[name], refused, shape)
            if host is None:
                problem = _capacity_problem(scenario, name, requests[name], hosts,
                                            wanted_host, spec.spread)
                problems.append(_with_unavailable(problem, spec.host, hosts, unavailable))
                continue
            placed[name] = host
            used_by_group.add(host.name)
    if problems:
        raise PlanError(problems)
    gpus_out, vgpus_by_vm = _finalise_gpus(hosts)
    vms = _planned_vms(scenario, inventory, placed, requests, vgpus_by_vm, inventory_name)
    _assign_rdma_nics(scenario, inventory, vms, inventory_name, notes)
    notes += llm_memory.plan_lines(scenario)
    plan = Plan(
        scenario_id=scenario.id, scenario_name=scenario.name, scenario_file=scenario.source,
        platform=scenario.platform, gpu_model=model.key,
        inventory=inventory_name or (inventory.name if inventory else None),
        hosts=[h.name for h in hosts], vms=vms, gpus=gpus_out,
        guest_steps=guest_steps(scenario),
        warnings=p2p_warnings(scenario, requests),
        harness_base=_harness_base_text(scenario, inventory, inventory_name),
        bench=[BenchItem(workload=w.label, kind=w.kind,
                         instances=[vm.name for vm in vms][: _instances_for(w, len(vms))],
                         repeats=scenario.repeats) for w in scenario.workloads],
        notes=notes,
    )
    plan.plan_hash = plan.compute_hash()
    return plan


def p2p_warnings(scenario: Scenario, requests: dict[str, list[VgpuRequest]]) -> list[str]:
    """``vm_settings.p2p`` on VMs with MIG-backed vGPUs: those have no P2P or NVLink, so
    the setting does nothing there (not an error: apply still sets it)."""
    if not scenario.vm_settings.p2p:
        return []
    mig_vms = [name for name, wanted in requests.items() if any(r.kind == "mig" for r in wanted)]
    if not mig_vms:
        return []
    return [f"{scenario.source or 'scenario'} vm_settings.p2p: true does nothing for "
            f"{', '.join(mig_vms)}: MIG-backed vGPUs have no P2P or NVLink (fix: remove "
            "vm_settings.p2p, or use full-framebuffer time-sliced vGPUs or passthrough GPUs "
            "where P2P is wanted)"]


def harness_base_for(scenario: Scenario, inventory: Inventory | None,
                     inventory_name: str | None = None) -> HarnessBase:
    """What the guests' harness image is built FROM: guest.base_image, else the NGC base
    of the inventory's guest driver branch (vSphere guests; a bare-metal host's driver is
    not the guest driver), else the default. An unknown branch is refused."""
    drivers = inventory.drivers if inventory and scenario.platform == "vsphere" else None
    version = drivers.guest_version() if drivers else None
    try:
        return harness_base(scenario.guest.base_image, version)
    except UnknownDriverBranch as exc:
        assert drivers is not None
        field = ("drivers.guest_driver_version" if drivers.guest_driver_version
                 else "drivers.guest_driver")
        raise PlanError([Problem(
            _inventory_file(inventory, inventory_name), field, str(exc),
            fix="set guest.base_image in the scenario to an NGC image whose CUDA this "
                "driver branch supports, or use a guest driver of a known branch")]) from None


def _harness_base_text(scenario: Scenario, inventory: Inventory | None,
                       inventory_name: str | None) -> str | None:
    if stepnames.HARNESS_IMAGE not in guest_steps(scenario) or scenario.guest.harness_image:
        return None
    base = harness_base_for(scenario, inventory, inventory_name)
    return f"{base.image} ({base.why})"


def _inventory_file(inventory: Inventory | None, inventory_name: str | None) -> str:
    """What a problem with the inventory names: the file, where it is known."""
    return inventory_name or (inventory.source if inventory else None) or "inventory"


def _instances_for(workload: object, n_vms: int) -> int:
    if isinstance(workload, InferenceWorkload):
        return n_vms
    nodes = getattr(workload, "nodes", n_vms)
    return min(int(nodes), n_vms)


def _capacity_problem(scenario: Scenario, vm: str, reqs: list[VgpuRequest],
                      hosts: list[_HostState], pinned: str | None, spread: bool) -> Problem:
    labels = " + ".join(r.label for r in reqs) or "no vGPU"
    where = f"host {pinned}" if pinned else f"{len(hosts)} host(s)"
    detail = ""
    profiles = [r.profile for r in reqs if r.profile]
    if profiles:
        for h in hosts:
            gpus = _mig_gpus(h)
            if not gpus:
                continue
            wanted = [p for _, _, p in h.mig_requests] + profiles
            held: list[mig.MigPlacement] = []
            for k, g in enumerate(gpus):
                r = mig.solve(h.gpus[0].model, _held_profiles(g)) if g.held else None
                if r and r.placements:
                    held += [mig.MigPlacement(p.profile, p.start, k, owner="held")
                             for p in r.placements]
            result = mig.solve(gpus[0].model, wanted, num_gpus=len(gpus), occupied=held)
            if not result.ok:
                detail = f"; on {h.name}: {result.reason}"
                if result.suggestions:
                    detail += "; nearest valid: " + "; ".join(
                        f"{s.description} ({_layout_text(s.profiles)})"
                        for s in result.suggestions)
                break
        detail += _full_hosts_text([h for h in hosts if pinned in (None, h.name)])
    if spread:
        detail += "; the group is spread one VM per host"
    held_on = sorted({f"{h.vm} ({h.label} on {h.host} GPU {h.gpu_index})"
                      for host in hosts for g in host.gpus for h in g.held})
    if held_on:
        detail += "; already held by other VMs: " + ", ".join(held_on)
    return Problem(scenario.source or f"scenario {scenario.id}", "vms",
                   f"no room for VM {vm} ({labels}) on {where}{detail}",
                   fix="free GPUs, add hosts to the inventory, or pick smaller profiles")


def _check_pin(scenario: Scenario, pin_host: str, hosts: list[_HostState],
               unavailable: dict[str, str], inventory: Inventory | None,
               inventory_name: str | None) -> None:
    """A pinned host must be one the plan may use, and no VM group may name another."""
    names = [h.name for h in hosts]
    if pin_host not in names:
        raise PlanError([Problem("command line", "--host",
                                 f"host {pin_host} is not a {scenario.gpu_model.key} host of "
                                 f"{_inventory_file(inventory, inventory_name)}",
                                 fix=f"use one of: {', '.join(names)}")])
    if pin_host in unavailable:
        raise PlanError([Problem("command line", "--host",
                                 f"host {pin_host} is {unavailable[pin_host]}",
                                 fix=f"run `vgpu undrain --host {pin_host}` (or exit "
                                     "maintenance mode in vCenter), then run again")])
    other = [spec.name for spec in scenario.vms if spec.host not in (None, pin_host)]
    if other:
        raise PlanError([Problem(scenario.source or f"scenario {scenario.id}", "vms.host",
                                 f"VM group(s) {', '.join(other)} name another host than "
                                 f"--host {pin_host}",
                                 fix="drop --host, or the groups' host")])


def _layout_text(profiles: Sequence[str]) -> str:
    """"4g.40gb + 2g.20gb + 2g.20gb", with a profile repeated three times or more
    counted: "28 x 1g.10gb"."""
    counts = Counter(profiles)
    parts: list[str] = []
    for name in dict.fromkeys(profiles):
        parts += [f"{counts[name]} x {name}"] if counts[name] >= 3 else [name] * counts[name]
    return " + ".join(parts)


def _full_hosts_text(hosts: list[_HostState], shown: int = 4) -> str:
    """The hosts that already hold VMs of this plan and took no more of them."""
    full = [h.name for h in hosts if h.vms]
    if len(full) < 2:
        return ""
    names = ", ".join(full[:shown]) + (f", ... {full[-1]}" if len(full) > shown else "")
    return f"; no room left on {len(full)} of {len(hosts)} host(s) ({names})"


def _with_unavailable(problem: Problem, pinned: str | None, hosts: list[_HostState],
                      unavailable: dict[str, str]) -> Problem:
    """Say which hosts were left out, and why, in a capacity problem."""
    skipped = [h.name for h in hosts if h.name in unavailable and pinned in (None, h.name)]
    if not skipped:
        return problem
    why = "; ".join(f"host {name} is {unavailable[name]}" for name in skipped)
    return Problem(problem.file, problem.field, f"{problem.message}; not used: {why}",
                   fix=f"exit maintenance mode on {', '.join(skipped)}, or "
                       + (problem.fix or "free GPUs"))


def _finalise_gpus(hosts: list[_HostState]) -> tuple[list[PlannedGpu],
                                                      dict[str, list[PlannedVgpu]]]:
    gpus_out: list[PlannedGpu] = []
    by_vm: dict[str, list[PlannedVgpu]] = {}
    for host in hosts:
        mig_slices: dict[int, list[PlannedSlice]] = {}
        if host.mig_requests:
            gpus = _mig_gpus(host)
            placements = _solve_host(host, gpus, [p for _, _, p in host.mig_requests])
            assert placements is not None  # every request was checked when assigned
            wanted = placements[: len(host.mig_requests)]
            for (vm, _, profile), pl in zip(host.mig_requests, wanted, strict=True):
                gpu = gpus[pl.gpu]
                gpu.mode = "mig"
                if vm not in gpu.tenants:
                    gpu.tenants.append(vm)
                mig_slices.setdefault(gpu.index, []).append(PlannedSlice(
                    owner=vm, profile=profile.name, start=pl.start,
                    memory_slices=profile.memory_slices, compute_slices=profile.compute_slices))
                by_vm.setdefault(vm, []).append(PlannedVgpu(
                    kind="mig", label=profile.name, vgpu_type=profile.vgpu_type(gpu.board_code),
                    gpu_index=gpu.index, pci_id=gpu.pci_id, start=pl.start,
                    compute_slices=profile.compute_slices, memory_slices=profile.memory_slices))
            for pl in placements[len(host.mig_requests):]:
                gpu = gpus[pl.gpu]
                owner = next((h.vm for h in gpu.held if h.label == pl.profile.name), "other")
                mig_slices.setdefault(gpu.index, []).append(PlannedSlice(
                    owner=f"held by {owner}", profile=pl.profile.name, start=pl.start,
                    memory_slices=pl.profile.memory_slices,
                    compute_slices=pl.profile.compute_slices, foreign=True))
        for g in host.gpus:
            for vm in g.tenants:
                if g.mode == "passthrough":
                    by_vm.setdefault(vm, []).append(PlannedVgpu(
                        kind="passthrough", label="passthrough", gpu_index=g.index,
                        pci_id=g.pci_id))
                elif g.mode == "timesliced":
                    by_vm.setdefault(vm, []).append(PlannedVgpu(
                        kind="timesliced", label=g.timesliced_type or "",
                        vgpu_type=mig.with_board(g.timesliced_type or "", g.board_code),
                        gpu_index=g.index, pci_id=g.pci_id))
            gpus_out.append(PlannedGpu(
                host=host.name, index=g.index, model=g.model.key, pci_id=g.pci_id,
                board=g.board_code,
                mode=_shown_mode(g),
                slices=sorted(mig_slices.get(g.index, []), key=lambda s: s.start),
                timesliced_type=g.timesliced_type, tenants=list(g.tenants)))
    return gpus_out, by_vm


def _shown_mode(gpu: _GpuState) -> GpuMode:
    """The GPU's mode in the plan: ours where we place something, else the kind of what
    other VMs hold on it (a GPU held in passthrough is not a MIG GPU)."""
    if gpu.mode != "unused" or not gpu.held:
        return gpu.mode
    kinds = {h.kind for h in gpu.held}
    only = kinds.pop() if len(kinds) == 1 else "mig"
    return cast(GpuMode, only)


def _planned_vms(scenario: Scenario, inventory: Inventory | None,
                 placed: dict[str, _HostState], requests: dict[str, list[VgpuRequest]],
                 vgpus_by_vm: dict[str, list[PlannedVgpu]],
                 inventory_name: str | None) -> list[PlannedVM]:
    static = inventory.network.static if inventory else {}
    pool = inventory.network.ip_pool.addresses() if inventory and inventory.network.ip_pool \
        else []
    free_pool = [ip for ip in pool if ip not in static.values()]
    vms: list[PlannedVM] = []
    for spec in scenario.vms:
        for name in spec.names():
            ip = static.get(name)
            if ip is None and free_pool and scenario.platform == "vsphere":
                ip = free_pool.pop(0)
            vms.append(PlannedVM(
                name=name, group=spec.name, host=placed[name].name, vcpu=spec.vcpu,
                memory_mb=spec.memory_gb * 1024,
                vgpus=vgpus_by_vm.get(name, []),
                extra_config=vm_extra_config(scenario, requests[name])
                if scenario.platform == "vsphere" else {},
                ip=ip))
    if scenario.platform == "vsphere" and pool and any(vm.ip is None for vm in vms):
        missing = [vm.name for vm in vms if vm.ip is None]
        raise PlanError([Problem(_inventory_file(inventory, inventory_name), "network.ip_pool",
                                 f"the pool has too few addresses for {', '.join(missing)}",
                                 fix="widen ip_pool or add static addresses")])
    return vms


def _assign_rdma_nics(scenario: Scenario, inventory: Inventory | None, vms: list[PlannedVM],
                      inventory_name: str | None, notes: list[str]) -> None:
    """Each VM's RDMA NIC when the scenario's network.rdma is roce or ib: from its host's
    rdma_nics, in the order listed; a passthrough NIC goes to one VM only, an SR-IOV or
    PVRDMA NIC is shared. A host that lists no rdma_nics gives its VMs none (a note says
    so: the guests then need the RDMA NIC some other way)."""
    network = scenario.network
    if scenario.platform != "vsphere" or inventory is None or network is None \
            or network.rdma == "none":
        return
    hosts = {h.name: h for h in inventory.hosts}
    taken: set[tuple[str, str]] = set()
    problems: list[Problem] = []
    for vm in vms:
        nics = hosts[vm.host].rdma_nics if vm.host in hosts else []
        if not nics:
            notes.append(f"network.rdma is {network.rdma} but host {vm.host} lists no "
                         f"rdma_nics: VM {vm.name} gets no RDMA NIC from apply")
            continue
        # PVRDMA speaks RoCE only; a passthrough NIC serves one VM.
        nic = next((n for n in nics if not (n.kind == "pvrdma" and network.rdma == "ib")
                    and (n.kind != "passthrough" or (vm.host, n.pci_id) not in taken)), None)
        if nic is None:
            problems.append(Problem(
                _inventory_file(inventory, inventory_name), f"hosts ({vm.host}).rdma_nics",
                f"VM {vm.name} needs an RDMA NIC (network.rdma: {network.rdma}) but host "
                f"{vm.host} has none left for it (a passthrough NIC serves one VM; PVRDMA "
                "is RoCE only)",
                fix="add another NIC to the host's rdma_nics, use an sriov NIC (it serves "
                    "several VMs), or set the scenario's network.rdma: none"))
            continue
        taken.add((vm.host, nic.pci_id))
        vm.rdma_nic = PlannedRdmaNic(pci_id=nic.pci_id, kind=nic.kind, model=nic.model,
                                     network=nic.network)
    if problems:
        raise PlanError(problems)
