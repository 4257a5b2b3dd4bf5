"""A simulator of the few pynvml calls device discovery makes, for machines without an
NVIDIA GPU. It answers like NVML does: handles, names, UUIDs, MIG mode, MIG device slots
(an empty slot raises NVMLError)."""

from __future__ import annotations

from dataclasses import dataclass, field


class NVMLError(Exception):
    pass


NVML_DEVICE_MIG_ENABLE = 1
NVML_DEVICE_MIG_DISABLE = 0


@dataclass
class SimulatedGpu:
    name: str
    uuid: str
    mig_profiles: list[str | None] = field(default_factory=list)  # None: an empty slot
    mig_capable: bool = True


@dataclass(frozen=True)
class _MigHandle:
    gpu: SimulatedGpu
    slot: int


class SimulatedNvml:
    NVMLError = NVMLError
    NVML_DEVICE_MIG_ENABLE = NVML_DEVICE_MIG_ENABLE

    def __init__(self, gpus: list[SimulatedGpu], driver_loaded: bool = True) -> None:
        self.gpus = gpus
        self.driver_loaded = driver_loaded
        self.initialised = 0

    def nvmlInit(self) -> None:
        if not self.driver_loaded:
            raise NVMLError("NVML Shared Library Not Found")
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self.initialised -= 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimulatedGpu:
        return self.gpus[index]

    def nvmlDeviceGetName(self, handle: SimulatedGpu | _MigHandle) -> str:
        if isinstance(handle, _MigHandle):
            return f"{handle.gpu.name} MIG {handle.gpu.mig_profiles[handle.slot]}"
        return handle.name

    def nvmlDeviceGetUUID(self, handle: SimulatedGpu | _MigHandle) -> str:
        if isinstance(handle, _MigHandle):
            return f"MIG-{handle.gpu.uuid[4:12]}-{handle.slot:04d}"
        return handle.uuid

    def nvmlDeviceGetMigMode(self, handle: SimulatedGpu) -> tuple[int, int]:
        if not handle.mig_capable:
            raise NVMLError("Not Supported")
        mode = NVML_DEVICE_MIG_ENABLE if handle.mig_profiles else NVML_DEVICE_MIG_DISABLE
        return mode, mode

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: SimulatedGpu) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: SimulatedGpu, slot: int) -> _MigHandle:
        if slot >= len(handle.mig_profiles) or handle.mig_profiles[slot] is None:
            raise NVMLError("Not Found")
        return _MigHandle(handle, slot)
