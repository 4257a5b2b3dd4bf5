"""NVML SIMULATOR: a stand-in for the parts of ``pynvml`` the harness telemetry calls, for
machines without an NVIDIA GPU. It models one H100 with one MIG 1g.10gb slice and answers
like NVML does on MIG: memory per slice, power and clocks per physical GPU, utilisation
NOT_SUPPORTED on the slice. Errors are the real ``pynvml.NVMLError`` classes."""

from __future__ import annotations

from dataclasses import dataclass

import pynvml

GPU_NAME = "NVIDIA H100 80GB HBM3"
GPU_UUID = "GPU-5f1c2d3e-0000-1111-2222-333344445555"
MIG_UUID = "MIG-8a7b6c5d-aaaa-bbbb-cccc-ddddeeeeffff"
MIG_NAME = f"{GPU_NAME} MIG 1g.10gb"


@dataclass(frozen=True)
class SimHandle:
    uuid: str
    name: str
    is_mig: bool
    memory_used: int


@dataclass(frozen=True)
class SimMemory:
    total: int
    used: int
    free: int


@dataclass(frozen=True)
class SimUtilization:
    gpu: int
    memory: int


class NvmlSimulator:
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_CLOCK_MEM = pynvml.NVML_CLOCK_MEM

    def __init__(self, power_mw: int = 215_000, sm_clock_mhz: int = 1980) -> None:
        self.gpu = SimHandle(GPU_UUID, GPU_NAME, False, 9 * 2**30)
        self.mig = SimHandle(MIG_UUID, MIG_NAME, True, 3 * 2**30)
        self.power_mw = power_mw
        self.sm_clock_mhz = sm_clock_mhz
        self.calls: list[str] = []

    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.90.07"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimHandle:
        if index != 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.gpu

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> SimHandle:
        for handle in (self.gpu, self.mig):
            if handle.uuid == uuid:
                return handle
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceIsMigDeviceHandle(self, handle: SimHandle) -> int:
        return int(handle.is_mig)

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: SimHandle) -> SimHandle:
        if not handle.is_mig:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.gpu

    def nvmlDeviceGetName(self, handle: SimHandle) -> str:
        return handle.name

    def nvmlDeviceGetUUID(self, handle: SimHandle) -> str:
        return handle.uuid

    def nvmlDeviceGetMemoryInfo(self, handle: SimHandle) -> SimMemory:
        total = 10 * 2**30 if handle.is_mig else 80 * 2**30
        return SimMemory(total, handle.memory_used, total - handle.memory_used)

    def nvmlDeviceGetPowerUsage(self, handle: SimHandle) -> int:
        self._physical_only(handle)
        return self.power_mw

    def nvmlDeviceGetClockInfo(self, handle: SimHandle, clock: int) -> int:
        self._physical_only(handle)
        return self.sm_clock_mhz if clock == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetUtilizationRates(self, handle: SimHandle) -> SimUtilization:
        self._physical_only(handle)
        return SimUtilization(gpu=87, memory=41)

    @staticmethod
    def _physical_only(handle: SimHandle) -> None:
        if handle.is_mig:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
