"""Targets on this machine: one harness instance per MIG device, else per GPU, else (CPU
only) one per planned VM/slice of the scenario with the cores split between them."""

from __future__ import annotations

import re
import shlex
import socket
import sys
from dataclasses import replace
from pathlib import Path

import psutil

from vgpu.model.load import vgpu_requests
from vgpu.model.scenario import Scenario
from vgpu.remote.local import LocalTransport
from vgpu.results.store.records import CPU_DEVICE_NOTE, Platform, TargetKind
from vgpu.targets.containers import ContainerLaunch
from vgpu.targets.devices import LocalDevice, cpu_count
from vgpu.targets.target import Target


def _platform(device: LocalDevice, vcpus: int) -> Platform:
    return Platform(
        host=socket.gethostname(), gpu=None if device.kind == "cpu" else device.name,
        mig_profile=device.mig_profile, attachment="none", vcpus=vcpus,
        memory_gb=round(psutil.virtual_memory().total / 2**30, 1),
    )


def planned_slices(scenario: Scenario) -> list[tuple[str, str]]:
    """(instance, its vGPU label) for every planned VM of the scenario; a VM with several
    whole GPUs passed through is one instance per GPU, as on the lab (vgpu.targets.placements)."""
    out: list[tuple[str, str]] = []
    for name, requests in vgpu_requests(scenario).items():
        labels = [r.label for r in requests]
        if len(labels) > 1 and all(label == "passthrough" for label in labels):
            out += [(f"{name}-gpu{k}", "passthrough") for k in range(len(labels))]
        else:
            out.append((name, "+".join(labels) or "no GPU"))
    return out


# What the harness reads to pace its backend as a simulated GPU of that many compute slices
# (loadgen.sample_run.SIM_DEVICE_SLICES; the simulator lab's guests set it too).
SIM_DEVICE_SLICES = "VGPU_SIM_DEVICE_SLICES"
FULL_GPU_SLICES = 7  # an A100's or H100's compute slices
_MIG_LABEL = re.compile(r"^(\d)g\.")


def simulated_slices(label: str, time_sliced_sharers: int = 1) -> int:
    """The compute slices a simulated GPU gives an instance of this planned vGPU label
    ("4g.40gb" 4, "passthrough" a whole GPU's 7, a time-sliced profile the whole GPU's
    share among the instances that time-slice it, "a+b" the sum)."""
    total = 0
    for part in label.split("+"):
        mig = _MIG_LABEL.match(part)
        if mig:
            total += int(mig.group(1))
        elif part == "passthrough":
            total += FULL_GPU_SLICES
        else:
            total += max(1, FULL_GPU_SLICES // max(1, time_sliced_sharers))
    return max(1, total)


def cores_each(cores: int, instances: int) -> int:
    """Intra-op threads per instance when ``instances`` share ``cores`` (at least one)."""
    return max(1, cores // max(1, instances))


def _launch(container: ContainerLaunch | None, device: LocalDevice,
            threads: int | None) -> ContainerLaunch | None:
    """The instance's container: its own GPU or MIG device (none for the CPU or the GPU
    simulator), and its share of the cores when instances split the CPU."""
    if container is None:
        return None
    real = device.kind != "cpu" and not device.simulated and device.uuid
    return replace(container, devices=(device.uuid,) if real and device.uuid else (),
                   cpus=float(threads) if threads else None)


def local_targets(
    scenario: Scenario, devices: list[LocalDevice], work_root: Path, cores: int | None = None,
    container: ContainerLaunch | None = None, simulated_gpu: bool = False,
) -> tuple[list[Target], list[str]]:
    """The targets and notes that say what this machine could and could not provide;
    ``container`` set: every instance runs in its own container of the harness image;
    ``simulated_gpu``: CPU instances paced as a GPU of their planned slices."""
    harness = f"{shlex.quote(sys.executable)} -m loadgen"
    work_root.mkdir(parents=True, exist_ok=True)
    transport = LocalTransport(home=work_root)
    notes: list[str] = []
    planned = planned_slices(scenario)
    cores = cores or cpu_count()
    # No hypervisor here: a bare-metal scenario run on this machine is a bare-metal run.
    kind: TargetKind = "bare-metal" if scenario.platform == "bare-metal" else "local"
    if devices and devices[0].kind != "cpu":
        simulated = any(d.simulated for d in devices)
        # Simulated MIG devices share the CPU, so they split its cores like CPU instances.
        threads = cores_each(cores, len(devices)) if simulated else None
        targets = []
        for number, device in enumerate(devices):
            label = device.mig_profile or device.name
            targets.append(Target(
                instance=device.owner or f"{device.kind}{number}-{label}".replace(" ", "_"),
                transport=transport, harness=harness, work_root=str(work_root),
                device=device.harness_device(), device_label=device.name,
                target_kind=kind, threads=threads, planned_slice=device.mig_profile,
                platform=_platform(device, threads or cores), local_root=work_root,
                env={**({"CUDA_VISIBLE_DEVICES": device.uuid}
                        if simulated and device.uuid else {}),
                     **({SIM_DEVICE_SLICES: str(simulated_slices(label))}
                        if simulated_gpu and device.simulated else {})},
                container=_launch(container, device, threads),
            ))
        wanted = ", ".join(label for _vm, label in planned)
        have = ", ".join(d.mig_profile or d.name for d in devices)
        notes.append(f"this machine: one instance per {devices[0].kind.upper()} device "
                     f"({have}); the scenario plans {wanted}")
        if simulated:
            notes.append("GPU simulator: each instance gets its simulated MIG UUID as "
                         "CUDA_VISIBLE_DEVICES, but the CPU does the work (no GPU here)")
        return targets, notes
    threads = cores_each(cores, len(planned))
    notes.append(
        f"CPU only: no GPU or MIG slice is used; {len(planned)} instances as the scenario "
        f"plans ({', '.join(label for _vm, label in planned)}), {cores} cores split as "
        f"{threads} intra-op thread(s) each"
    )
    cpu = LocalDevice(kind="cpu", name="CPU")
    sharers = sum(1 for _vm, label in planned
                  if label not in ("passthrough", "no GPU") and not _MIG_LABEL.match(label))
    targets = []
    for vm, label in planned:
        slices = simulated_slices(label, sharers) if simulated_gpu else 0
        targets.append(Target(
            instance=vm, transport=transport, harness=harness, work_root=str(work_root),
            device=cpu.harness_device(),
            device_label=(f"SIMULATED GPU, {slices} slice(s) (planned {label})" if slices
                          else f"{CPU_DEVICE_NOTE} (planned {label})"),
            target_kind=kind, threads=threads, planned_slice=label,
            platform=_platform(cpu, threads), local_root=work_root,
            env={SIM_DEVICE_SLICES: str(slices)} if slices else {},
            container=_launch(container, cpu, threads),
        ))
    if simulated_gpu:
        notes.append("SIMULATED GPU: each instance's batches complete as a device of its "
                     "planned compute slices would finish them (the CPU computes them; "
                     "run-to-run noise 0.5%): no GPU is measured")
    return targets, notes
