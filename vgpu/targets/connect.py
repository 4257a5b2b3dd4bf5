"""Targets connected: every placement's host reached (over SSH, or this machine), its
clock checked, its harness (the one `vgpu provision` installed) probed, and each instance
given its device: the VM's GPU, a MIG device of the planned profile, or the CPU."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vgpu.defaults import DEFAULT_MAX_CLOCK_OFFSET_MS
from vgpu.errors import RemoteError
from vgpu.provision.facts import ListedDevice
from vgpu.provision.steps.harness import HARNESS_DIR
from vgpu.remote.hostlog import HostLog
from vgpu.remote.local import LocalTransport
from vgpu.remote.redact import Redactor
from vgpu.remote.ssh import SSHTransport
from vgpu.remote.targets import ConnectOptions, HostTarget
from vgpu.remote.transport import Transport
from vgpu.results.store.records import CPU_DEVICE_NOTE
from vgpu.targets.clock import ClockOffset, check_offset, measure_offset
from vgpu.targets.containers import ContainerLaunch
from vgpu.targets.hostprobe import HostHarness, probe_host
from vgpu.targets.placements import NO_GPU, HarnessPlacement
from vgpu.targets.target import Target

HARNESS_PYTHON = f"{HARNESS_DIR}/venv/bin/python"  # relative to the login home
WORK_ROOT = ".vgpu/bench"
GPU_PROVIDERS = ("CUDAExecutionProvider", "TensorrtExecutionProvider")

HostTargetHook = Callable[[HostTarget], HostTarget]


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
    this machine's first (vgpu.targets.clock): one off by more than ``max_clock_offset_ms``
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
