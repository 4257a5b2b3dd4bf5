"""What this machine offers a benchmark: its MIG devices, else its GPUs, else the CPU.
Read through NVML (pynvml); any NVML failure means no GPU is usable here."""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

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
        CPU: the harness must not look for a CUDA provider there."""
        if self.simulated:
            return {"kind": "cpu"}
        if self.kind == "mig":
            return {"kind": "mig", "uuid": self.uuid}
        if self.kind == "gpu":
            return {"kind": "gpu", "index": self.index}
        return {"kind": "cpu"}


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _mig_devices(nvml: Any, handle: Any, parent_name: str) -> list[LocalDevice]:
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError:
        return []  # not a MIG-capable GPU
    if current != nvml.NVML_DEVICE_MIG_ENABLE:
        return []
    devices = []
    for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except nvml.NVMLError:
            continue  # an empty slot
        name = _text(nvml.nvmlDeviceGetName(mig))
        profile = name.split("MIG", 1)[1].strip() if "MIG" in name else name
        devices.append(LocalDevice(
            kind="mig", name=f"MIG {profile} on {parent_name}",
            uuid=_text(nvml.nvmlDeviceGetUUID(mig)), mig_profile=profile,
        ))
    return devices


def simulated_mig_devices() -> list[LocalDevice]:
    """MIG devices of the GPU simulator, only when one was asked for explicitly
    (VGPU_GPU_SIMULATOR) and this machine has no GPU."""
    if not os.environ.get("VGPU_GPU_SIMULATOR"):
        return []
    from vgpu.nvml.bench import mig_devices_for_bench

    return [LocalDevice(kind="mig", name=f"simulated MIG {d.profile} (GPU simulator; the CPU "
                        "does the work)", index=d.gpu_index, uuid=d.uuid, mig_profile=d.profile,
                        simulated=True, owner=d.owner)
            for d in mig_devices_for_bench() if d.simulated]


def discover(nvml: ModuleType | Any | None = None) -> list[LocalDevice]:
    """MIG devices if any GPU has some, else whole GPUs, else the simulator's MIG devices
    when one was asked for, else ``[CPU]``."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return simulated_mig_devices() or [cpu_device()]
    try:
        nvml.nvmlInit()
    except Exception:  # NVML missing or no driver: NVMLError or OSError alike
        return simulated_mig_devices() or [cpu_device()]
    try:
        gpus: list[LocalDevice] = []
        migs: list[LocalDevice] = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = _text(nvml.nvmlDeviceGetName(handle))
            gpus.append(LocalDevice(kind="gpu", name=name, index=index,
                                    uuid=_text(nvml.nvmlDeviceGetUUID(handle))))
            migs += _mig_devices(nvml, handle, name)
    finally:
        nvml.nvmlShutdown()
    return migs or gpus or [cpu_device()]


def cpu_device() -> LocalDevice:
    return LocalDevice(kind="cpu", name="CPU")


def cpu_count() -> int:
    """Cores this process may use (the affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
