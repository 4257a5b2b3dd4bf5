"""What this machine offers a benchmark: its MIG devices, else its GPUs, else the CPU.
Read through the NVML layer's GpuBackend (vgpu.nvml): the real GPU, or the GPU simulator
when one was asked for (VGPU_GPU_SIMULATOR); no GPU usable here means the CPU."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from vgpu.nvml.backend import GpuBackend
from vgpu.nvml.errors import NvmlUnavailable
from vgpu.nvml.local_devices import MigDeviceInfo, mig_devices_for_bench
from vgpu.nvml.select import backend_for_this_machine

DeviceKind = Literal["cpu", "gpu", "mig"]


@dataclass(frozen=True)
class LocalDevice:
    kind: DeviceKind
    name: str  # "NVIDIA A100 80GB PCIe", "MIG 2g.20gb on NVIDIA A100 80GB PCIe", "CPU"
    index: int | None = None
    uuid: str | None = None
    mig_profile: str | None = None
    simulated: bool = False  # a MIG device of the GPU simulator: the CPU does the work
    owner: str | None = None  # the planned instance `vgpu mig apply` made it for

    def harness_device(self) -> dict[str, Any]:
        """The ``device`` section of a harness spec. A simulated MIG device runs on the
        CPU: the harness must not look for a CUDA provider there. A GPU goes by its UUID:
        ``index`` is NVML's (PCI bus order), CUDA numbers GPUs fastest first unless
        CUDA_DEVICE_ORDER=PCI_BUS_ID, so the index alone could bind another GPU."""
        if self.simulated:
            return {"kind": "cpu"}
        if self.kind == "mig":
            return {"kind": "mig", "uuid": self.uuid}
        if self.kind == "gpu":
            return {"kind": "gpu", "uuid": self.uuid} if self.uuid else \
                {"kind": "gpu", "index": self.index}
        return {"kind": "cpu"}


def discover(backend: GpuBackend | None = None) -> list[LocalDevice]:
    """MIG devices if any GPU has some, else whole GPUs, else ``[CPU]``. Without
    ``backend``: this machine's (backend_for_this_machine, closed again afterwards). A
    simulated GPU runs nothing itself: of the simulator only MIG devices are offered, and
    the CPU does their work."""
    if backend is not None:
        return _devices(backend)
    try:
        backend = backend_for_this_machine()
    except NvmlUnavailable:
        return [cpu_device()]
    try:
        return _devices(backend)
    finally:
        backend.close()


def _devices(backend: GpuBackend) -> list[LocalDevice]:
    gpus = backend.gpus()
    names = {gpu.index: gpu.name for gpu in gpus}
    migs = [_mig_device(d, names[d.gpu_index]) for d in mig_devices_for_bench(backend)]
    if migs or backend.simulated:
        return migs or [cpu_device()]
    return [LocalDevice(kind="gpu", name=gpu.name, index=gpu.index, uuid=gpu.uuid)
            for gpu in gpus] or [cpu_device()]


def _mig_device(device: MigDeviceInfo, parent_name: str) -> LocalDevice:
    name = (f"simulated MIG {device.profile} (GPU simulator; the CPU does the work)"
            if device.simulated else f"MIG {device.profile} on {parent_name}")
    return LocalDevice(kind="mig", name=name, index=device.gpu_index, uuid=device.uuid,
                       mig_profile=device.profile, simulated=device.simulated,
                       owner=device.owner)


def cpu_device() -> LocalDevice:
    return LocalDevice(kind="cpu", name="CPU")


def cpu_count() -> int:
    """Cores this process may use (the affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
