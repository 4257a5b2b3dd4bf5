"""One GPU's MIG picture (mode, profiles, instances, MIG devices, processes) read through a
backend; shared by `vgpu mig status` and the JSON entry point."""

from __future__ import annotations

from vgpu.nvml import errors
from vgpu.nvml.backend import GpuBackend
from vgpu.nvml.errors import MigError
from vgpu.nvml.types import GpuSnapshot


def snapshot(backend: GpuBackend, gpu_index: int) -> GpuSnapshot:
    gpu = next(g for g in backend.gpus() if g.index == gpu_index)
    snap = GpuSnapshot(gpu=gpu, mig_mode=None)
    try:
        snap.mig_mode = backend.mig_mode(gpu.index)
    except MigError as exc:
        snap.note = f"no MIG: {exc}"
        return snap
    snap.profiles = backend.gpu_instance_profiles(gpu.index)
    snap.processes = backend.running_processes(gpu.index)
    if snap.mig_mode.current:
        snap.devices = backend.mig_devices(gpu.index)
        try:
            snap.instances = backend.gpu_instances(gpu.index)
        except MigError as exc:
            if exc.code != errors.NO_PERMISSION:
                raise
            snap.note = "listing GPU and compute instances needs root (sudo); MIG devices shown"
    return snap


def snapshots(backend: GpuBackend) -> list[GpuSnapshot]:
    return [snapshot(backend, g.index) for g in backend.gpus()]
