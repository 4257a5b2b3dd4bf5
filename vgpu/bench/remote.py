"""Targets from an inventory: the scenario's VMs as vCenter reports them (owned by vgpu,
marked with the scenario id, with their guest IP), or its bare-metal hosts; each reached
over SSH with the harness that `vgpu provision` installed there."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vgpu.bench.clock import ClockOffset, check_offset, measure_offset
from vgpu.bench.containers import ContainerLaunch
from vgpu.bench.hostprobe import HostHarness, probe_host
from vgpu.bench.targets import Target
from vgpu.bench.workload import DEFAULT_MAX_CLOCK_OFFSET_MS
from vgpu.errors import RemoteError
from vgpu.model.inventory import Inventory
from vgpu.model.plan import Plan, PlannedVM
from vgpu.model.scenario import Scenario
from vgpu.provision.adapter import jobs_from_plan
from vgpu.provision.facts import ListedDevice
from vgpu.provision.steps.harness import HARNESS_DIR
from vgpu.remote.hostlog import HostLog
from vgpu.remote.local import LocalTransport
from vgpu.remote.redact import Redactor
from vgpu.remote.ssh import SSHTransport
from vgpu.remote.targets import ConnectOptions, HostTarget
from vgpu.remote.transport import Transport
from vgpu.results.records import CPU_DEVICE_NOTE, Platform, TargetKind

if TYPE_CHECKING:
    from vgpu.site import Site
    from vgpu.vsphere.facts import HostFacts

HARNESS_PYTHON = f"{HARNESS_DIR}/venv/bin/python"  # relative to the login home
WORK_ROOT = ".vgpu/bench"
GPU_PROVIDERS = ("CUDAExecutionProvider", "TensorrtExecutionProvider")

HostTargetHook = Callable[[HostTarget], HostTarget]


@dataclass(frozen=True)
class HarnessPlacement:
    """One harness instance: the planned VM (or bare-metal tenant) and where it runs."""

    instance: str
    host_target: HostTarget | None  # None: this machine
    planned_slice: str
    target_kind: TargetKind
    platform: Platform
    gpu_index: int | None = None  # a whole GPU: its index on the host / in the guest


NO_GPU = "no GPU"


def _slice_of(plan: Plan, name: str) -> str:
    return "+".join(v.label for v in plan.vm(name).vgpus) or NO_GPU


def per_whole_gpu(vm: PlannedVM, base: HarnessPlacement) -> list[HarnessPlacement]:
    """A VM with several whole GPUs passed through gets one harness instance per GPU
    (``<vm>-gpu<k>``, GPU k in the guest), so every GPU is measured; any other VM is one
    instance on GPU 0 of its guest."""
    whole = [v for v in vm.vgpus if v.kind == "passthrough"]
    if len(whole) < 2 or len(whole) != len(vm.vgpus):
        return [replace(base, gpu_index=0 if vm.vgpus else None)]
    return [replace(base, instance=f"{vm.name}-gpu{k}", planned_slice="passthrough",
                    gpu_index=k) for k in range(len(whole))]


def _whole_gpu_index(vm: PlannedVM) -> int | None:
    """The host GPU index of a bare-metal tenant that has a whole GPU (not a MIG slice)."""
    whole = [v for v in vm.vgpus if v.kind == "passthrough"]
    return whole[0].gpu_index if whole else None


def vsphere_placements(scenario: Scenario, inventory: Inventory, inventory_path: Path, *,
                       simulated: str | None = None) -> list[HarnessPlacement]:
    """The scenario's VMs as vCenter reports them; ``simulated`` says what of their platform
    is a simulator (recorded with each result)."""
    from vgpu.vsphere.connection import connect
    from vgpu.vsphere.facts import read_host_drivers
    from vgpu.vsphere.from_inventory import target_from_inventory
    from vgpu.vsphere.workflow import read_scenario_state

    with connect(target_from_inventory(inventory, inventory_path)) as session:
        state = read_scenario_state(session, scenario, inventory, inventory_path)
        plan = state.build_plan()
        vms = state.state.vms
        used = {vms[vm.name].host for vm in plan.vms if vm.name in vms}
        hosts = state.state.hosts
        read_host_drivers({name: f for name, f in hosts.items() if name in used})
    found = {}
    for planned in plan.vms:
        actual = vms.get(planned.name)
        if actual is None or not actual.owned or actual.scenario != scenario.id:
            raise RemoteError(f"VM {planned.name} of scenario {scenario.id} is not in vCenter "
                              f"(owned by vgpu): run `vgpu apply` and `vgpu provision` first")
        if not actual.powered_on or not actual.ip:
            raise RemoteError(f"VM {planned.name} has no guest IP (powered "
                              f"{'on' if actual.powered_on else 'off'}): power it on and "
                              "check VMware Tools")
        found[planned.name] = actual
    plan = plan.model_copy(update={"vms": [
        vm.model_copy(update={"ip": found[vm.name].ip}) for vm in plan.vms]})
    jobs = {job.target.name: job.target for job in jobs_from_plan(
        plan, scenario, inventory, inventory_dir=inventory_path.parent)}
    placements = []
    for vm in plan.vms:
        actual = found[vm.name]
        facts = hosts.get(actual.host or "")
        platform = Platform(
            simulator=simulated,
            host=actual.host, esxi_version=facts.version if facts else None,
            esxi_build=facts.build if facts else None, gpu=scenario.gpu,
            host_driver=_driver_text(facts),
            firmware=actual.firmware, vm_hardware_version=actual.hardware_version,
            vgpu_profile="+".join(actual.vgpus) or None,
            mig_profile="+".join(v.label for v in vm.vgpus if v.kind == "mig") or None,
            attachment="passthrough" if actual.passthrough_ids else "vgpu",
            vcpus=actual.num_cpus, memory_gb=actual.memory_mb / 1024,
        )
        placements += per_whole_gpu(vm, HarnessPlacement(vm.name, jobs[vm.name],
                                                  _slice_of(plan, vm.name), "vm", platform))
    return placements


def _driver_text(facts: HostFacts | None) -> str | None:
    driver = facts.host_driver if facts else None
    return f"{driver.name} {driver.version}" if driver else None


def bare_metal_placements(scenario: Scenario, inventory: Inventory, inventory_path: Path,
                          plan: Plan) -> list[HarnessPlacement]:
    jobs = {job.target.name: job.target for job in jobs_from_plan(
        plan, scenario, inventory, inventory_dir=inventory_path.parent)}
    local = {h.name for h in inventory.bare_metal if h.is_local}
    return [
        HarnessPlacement(vm.name, None if vm.host in local else jobs[vm.host],
                  _slice_of(plan, vm.name), "bare-metal",
                  Platform(host=vm.host, gpu=scenario.gpu, attachment="none",
                           mig_profile=_slice_of(plan, vm.name)),
                  gpu_index=_whole_gpu_index(vm))
        for vm in plan.vms
    ]


def scenario_placements(scenario: Scenario, site: Site) -> list[HarnessPlacement]:
    """Where the scenario's instances run on the site's inventory: its VMs as vCenter
    reports them, or its bare-metal hosts. Bench and training both start from here."""
    inventory, path = site.require(f"scenario {scenario.id} runs on an inventory's hosts",
                                   fix="pass --inventory FILE")
    if scenario.platform == "vsphere":
        return vsphere_placements(scenario, inventory, path, simulated=(
            site.lab.description if site.lab is not None else None))
    return bare_metal_placements(scenario, inventory, path, site.plan(scenario))


def build_targets(
    placements: list[HarnessPlacement],
    log_root: Path,
    options: ConnectOptions = ConnectOptions(),
    host_target_hook: HostTargetHook | None = None,
    allow_cpu: bool = False,
    container: ContainerLaunch | None = None,
    max_clock_offset_ms: float = DEFAULT_MAX_CLOCK_OFFSET_MS,
) -> tuple[list[Target], list[str]]:
    """Connect to every host (one SSH session per host), check the harness there and pick
    each instance's device: the VM's GPU (a vGPU is GPU 0 in its guest), the host's MIG
    device of the planned profile. A planned GPU that the harness cannot use fails the
    instance; only ``allow_cpu`` (or a plan with no GPU) runs it on the CPU, said in notes.
    ``container`` set: every instance runs in its own container of that harness image,
    given only its own GPU or MIG device. Each remote host's clock is checked against
    this machine's first (vgpu.bench.clock): one off by more than ``max_clock_offset_ms``
    refuses the start."""
    hosts: dict[str, HostHarness] = {}
    clocks: dict[str, ClockOffset] = {}
    targets: list[Target] = []
    notes: list[str] = []
    redactor = Redactor()
    try:
        for placement in placements:
            key = placement.host_target.name if placement.host_target else "local"
            if key not in hosts:
                transport = _open(placement, log_root, options, host_target_hook, redactor)
                if placement.host_target is not None:
                    clocks[key] = _checked_clock(transport, max_clock_offset_ms, notes)
                hosts[key] = _probe(transport, key, placement, log_root, container)
            target = _target(placement, hosts[key], notes, allow_cpu)
            target.clock = clocks.get(key)
            targets.append(target)
    except BaseException:
        for host in hosts.values():
            host.transport.close()
        raise
    return targets, notes


def _checked_clock(transport: Transport, max_offset_ms: float,
                   notes: list[str]) -> ClockOffset:
    try:
        clock = measure_offset(transport)
        check_offset(clock, max_offset_ms)
    except BaseException:
        transport.close()
        raise
    notes.append(f"clock: {clock.describe()}, allowed ±{max_offset_ms:g} ms")
    return clock


def _probe(transport: Transport, name: str, placement: HarnessPlacement, log_root: Path,
           container: ContainerLaunch | None) -> HostHarness:
    remote = placement.host_target is not None
    try:
        return probe_host(transport, name,
                          python=HARNESS_PYTHON if remote else shlex.quote(sys.executable),
                          work_root=WORK_ROOT if remote else str(log_root.resolve()),
                          container=container)
    except BaseException:
        transport.close()
        raise


def _open(placement: HarnessPlacement, log_root: Path, options: ConnectOptions,
          hook: HostTargetHook | None, redactor: Redactor) -> Transport:
    if placement.host_target is None:
        log_root.mkdir(parents=True, exist_ok=True)
        return LocalTransport(home=log_root)
    host_target = hook(placement.host_target) if hook else placement.host_target
    transport = SSHTransport(host_target, options,
                             HostLog(log_root / f"{host_target.name}.log", redactor))
    transport.connect()
    return transport


def _refuse_cpu(placement: HarnessPlacement, providers: list[str]) -> RemoteError:
    where = placement.host_target.name if placement.host_target else "this machine"
    return RemoteError(
        f"{placement.instance} on {where}: planned {placement.planned_slice}, but the "
        f"harness there finds no GPU provider (ONNX Runtime has "
        f"{', '.join(providers) or 'none'}); a CPU run would not measure the GPU. Fix: run "
        "`vgpu provision` for this scenario (it installs the GPU build of the harness), "
        "check `nvidia-smi` in the guest, or pass --allow-cpu for a functional check on "
        "the CPU")


def _target(placement: HarnessPlacement, host: HostHarness, notes: list[str],
            allow_cpu: bool) -> Target:
    remote = placement.host_target is not None
    common: dict[str, Any] = {
        "instance": placement.instance, "transport": host.transport,
        "harness": host.harness, "work_root": host.work_root,
        "target_kind": placement.target_kind, "planned_slice": placement.planned_slice,
        "platform": placement.platform,
        "local_root": None if remote else Path(host.work_root),
    }
    if not any(p in host.providers for p in GPU_PROVIDERS):
        if placement.planned_slice != NO_GPU and not allow_cpu:
            raise _refuse_cpu(placement, host.providers)
        notes.append(f"{placement.instance}: ONNX Runtime there has no GPU provider "
                     f"({', '.join(host.providers)}): runs on the CPU, no MIG slice used")
        return Target(device={"kind": "cpu"},
                      device_label=f"{CPU_DEVICE_NOTE} (planned {placement.planned_slice})",
                      container=host.launch_for(()), **common)
    if placement.target_kind == "bare-metal" and placement.gpu_index is None:
        pool = host.mig_pool.get(placement.planned_slice, [])
        if not pool:
            raise RemoteError(f"{placement.instance}: no free MIG device "
                              f"{placement.planned_slice} on its host: run "
                              "`vgpu mig apply` first")
        uuid = pool.pop(0)
        return Target(device={"kind": "mig", "uuid": uuid},
                      device_label=f"MIG {placement.planned_slice} {uuid}",
                      container=host.launch_for((uuid,)), **common)
    index = placement.gpu_index or 0
    device = _listed_device(placement, host, index)
    label = (f"GPU {index} (passthrough)" if placement.planned_slice == "passthrough"
             else f"vGPU {placement.platform.vgpu_profile}")
    return Target(device=device_section(device), device_label=label,
                  container=host.launch_for((device.uuid,)), **common)


def device_section(device: ListedDevice) -> dict[str, Any]:
    """The harness spec's device, by UUID: inside a container given one GPU that GPU is
    CUDA device 0 whatever its index on the host, and CUDA's own numbering (fastest first)
    need not follow nvidia-smi's, so an index would name the wrong GPU or none."""
    kind = "mig" if device.uuid.startswith("MIG-") else "gpu"
    return {"kind": kind, "uuid": device.uuid}


def _listed_device(placement: HarnessPlacement, host: HostHarness, index: int) -> ListedDevice:
    device = host.listing.compute_device(index)
    if device is None:
        where = placement.host_target.name if placement.host_target else "this machine"
        raise RemoteError(
            f"{placement.instance}: planned GPU {index} on {where}, but `nvidia-smi -L` "
            f"there lists {len(host.listing.gpu_devices)} GPU(s) "
            f"({host.listing.summary()}). Fix: check the VM's GPUs (`vgpu provision`, "
            "step verify-gpu) and the guest driver")
    return device
