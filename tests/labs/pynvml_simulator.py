"""PynvmlSimulator: the `pynvml` module's shape over the one GPU simulator,
vgpu.nvml.simulator.SimulatedGpuBackend, for the code that talks to NVML itself:
NvmlBackend (vgpu/nvml/real.py), device discovery through it, and the harness telemetry
(loadgen/telemetry.py). Installed as ``sys.modules["pynvml"]`` it is what `import pynvml`
finds.

It keeps NVML's C contract where callers could get it wrong: GPU-instance profile info is
looked up by the NVML_GPU_INSTANCE_PROFILE_* *index*, everything else by the returned
*id*; placements are passed by reference; arrays are ctypes arrays filled up to the count;
handles are opaque; every call before nvmlInit fails. Errors are real ``pynvml.NVMLError``
instances with the driver's return codes. A MIG device keeps its slot
(nvmlDeviceGetMigDeviceHandleByIndex) while it exists and a new one takes the lowest free
slot, so slots can be empty. On a MIG device NVML has no power, clocks or utilisation; on a
GPU with MIG on no utilisation. The telemetry values come from ``readings``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml

from vgpu.nvml.backend import COMPUTE_PROFILE_FOR_SLICES
from vgpu.nvml.errors import MigError
from vgpu.nvml.simulator import SimulatedGpuBackend
from vgpu.nvml.types import MigDevice

_KIND_DEVICE, _KIND_GI, _KIND_CI, _KIND_MIG = 1, 2, 3, 4
_SLICES_FOR_COMPUTE_PROFILE = {v: k for k, v in COMPUTE_PROFILE_FOR_SLICES.items()}
_MIB = 1024 * 1024
DRIVER_VERSION = "550.127.05"


@dataclass
class SimulatedReadings:
    """What the telemetry calls read: the GPU simulator has no load of its own."""

    power_mw: int = 215_000
    sm_clock_mhz: int = 1980
    memory_clock_mhz: int = 2619
    utilization: tuple[int, int] = (87, 41)  # GPU %, memory %
    memory_used: dict[str, int] = field(default_factory=dict)  # bytes by GPU or MIG UUID
    throttle_reasons: int = 0  # nvmlClocksThrottleReason* bits (0: none)
    # processes on a GPU or MIG device by UUID: (pid, used memory bytes); a device not
    # named lists the GPU simulator's running processes without their memory
    processes: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    sm_percent: dict[int, int] = field(default_factory=dict)  # per-process SM share by pid


def _error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


def _key(handle: Any) -> int:
    return ctypes.cast(handle, ctypes.c_void_p).value or 0


class PynvmlSimulator:
    """``NvmlBackend(PynvmlSimulator.started(sim))``, or ``sys.modules["pynvml"] =
    PynvmlSimulator(sim)`` for code that imports pynvml and calls nvmlInit itself."""

    NVMLError = pynvml.NVMLError
    NVML_DEVICE_MIG_ENABLE = pynvml.NVML_DEVICE_MIG_ENABLE
    NVML_DEVICE_MIG_DISABLE = pynvml.NVML_DEVICE_MIG_DISABLE
    NVML_GPU_INSTANCE_PROFILE_COUNT = pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT
    NVML_COMPUTE_INSTANCE_PROFILE_COUNT = pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT
    NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_CLOCK_MEM = pynvml.NVML_CLOCK_MEM
    c_nvmlGpuInstancePlacement_t = pynvml.c_nvmlGpuInstancePlacement_t
    c_nvmlGpuInstance_t = pynvml.c_nvmlGpuInstance_t
    c_nvmlComputeInstance_t = pynvml.c_nvmlComputeInstance_t

    def __init__(self, sim: SimulatedGpuBackend, *, driver_loaded: bool = True,
                 hidden_without_mig: str = "", old_driver: bool = False,
                 readings: SimulatedReadings | None = None) -> None:
        """``driver_loaded=False``: nvmlInit fails as without a driver.
        ``hidden_without_mig``: "profiles" or "placements" to act like a driver that lists
        them only with MIG mode on (answering Not Supported). ``old_driver``: no v2
        profile-info call (Function Not Found), so profiles come without names."""
        self.sim = sim
        self.driver_loaded = driver_loaded
        self.old_driver = old_driver
        self.hidden_without_mig = hidden_without_mig
        self.readings = readings or SimulatedReadings()
        self.calls: list[str] = []
        self.initialised = False
        self._mig_slots: dict[int, dict[int, str]] = {}

    @classmethod
    def started(cls, sim: SimulatedGpuBackend, **options: Any) -> PynvmlSimulator:
        nvml = cls(sim, **options)
        nvml.nvmlInit()
        return nvml

    # ---- plumbing ------------------------------------------------------------------------
    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml"):
            object.__getattribute__(self, "calls").append(name)
            if name != "nvmlInit" and not object.__getattribute__(self, "initialised"):
                raise _error(pynvml.NVML_ERROR_UNINITIALIZED)
        return object.__getattribute__(self, name)

    @staticmethod
    def _sim(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except MigError as exc:
            raise _error(exc.code) from None

    @staticmethod
    def _handle(ptr_type: Any, kind: int, gpu: int, gi: int = 0, ci: int = 0) -> Any:
        key = kind << 24 | (gpu + 1) << 16 | (gi + 1) << 8 | (ci + 1)
        return ctypes.cast(ctypes.c_void_p(key), ptr_type)

    @staticmethod
    def _decode(handle: Any, kind: int) -> tuple[int, int, int]:
        key = _key(handle)
        if key >> 24 != kind:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return (key >> 16 & 0xFF) - 1, (key >> 8 & 0xFF) - 1, (key & 0xFF) - 1

    @staticmethod
    def _set_count(count_ref: Any, value: int) -> int:
        if type(count_ref).__name__ != "CArgObject":
            raise TypeError("count must be passed by reference (ctypes.byref)")
        capacity = count_ref._obj.value
        count_ref._obj.value = value
        return capacity

    def _mig_on(self, gpu: int) -> bool:
        try:
            return self.sim.mig_mode(gpu).current
        except MigError:
            return False

    # ---- system --------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        if not self.driver_loaded:
            raise _error(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return DRIVER_VERSION

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040

    def nvmlSystemGetNVMLVersion(self) -> str:
        return f"12.{DRIVER_VERSION}"

    # ---- devices -------------------------------------------------------------------------
    def nvmlDeviceGetCount(self) -> int:
        return len(self.sim.gpus())

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        if not 0 <= index < len(self.sim.gpus()):
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._handle(pynvml.c_nvmlDevice_t, _KIND_DEVICE, index)

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> Any:
        wanted = uuid.decode() if isinstance(uuid, bytes) else uuid
        for gpu in self.sim.gpus():
            if gpu.uuid == wanted:
                return self._handle(pynvml.c_nvmlDevice_t, _KIND_DEVICE, gpu.index)
            for d in self.sim.mig_devices(gpu.index):
                if d.uuid == wanted:
                    return self._mig_handle(d)
        raise _error(pynvml.NVML_ERROR_NOT_FOUND)

    def _gpu(self, handle: Any) -> int:
        return self._decode(handle, _KIND_DEVICE)[0]

    def _physical_gpu(self, handle: Any) -> int:
        if _key(handle) >> 24 == _KIND_MIG:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self._gpu(handle)

    def _driver_name(self, gpu: int) -> str:
        return self.sim.gpus()[gpu].name.replace(" (simulated)", "")

    def nvmlDeviceGetName(self, handle: Any) -> str:
        if _key(handle) >> 24 == _KIND_MIG:  # the driver's spelling: "<parent name> MIG 1g.10gb"
            device = self._mig_device(handle)
            return f"{self._driver_name(device.gpu_index)} MIG {device.profile}"
        return self._driver_name(self._gpu(handle))

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        info = self.sim.gpus()[self._gpu(handle)]
        return SimpleNamespace(busId=info.pci_bus_id.encode(),
                               pciDeviceId=info.pci_device_id << 16 | 0x10DE)

    def _mig_device(self, handle: Any) -> MigDevice:
        gpu, gi, ci = self._decode(handle, _KIND_MIG)
        for d in self.sim.mig_devices(gpu):
            if (d.gpu_instance_id, d.compute_instance_id) == (gi, ci):
                return d
        raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        if _key(handle) >> 24 == _KIND_MIG:
            return self._mig_device(handle).uuid
        return self.sim.gpus()[self._gpu(handle)].uuid

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:
        if _key(handle) >> 24 == _KIND_MIG:
            device = self._mig_device(handle)
            uuid, total = device.uuid, device.memory_mb * _MIB
        else:
            gpu = self.sim.gpus()[self._gpu(handle)]
            uuid, total = gpu.uuid, gpu.memory_mb * _MIB
        used = self.readings.memory_used.get(uuid, 0)
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        mode = self._sim(self.sim.mig_mode, self._gpu(handle))
        return [int(mode.current), int(mode.pending)]

    def nvmlDeviceSetMigMode(self, handle: Any, mode: int) -> int:
        self._sim(self.sim.set_mig_mode, self._gpu(handle), mode == pynvml.NVML_DEVICE_MIG_ENABLE)
        return pynvml.NVML_SUCCESS

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        uuid = self.nvmlDeviceGetUUID(handle)
        if uuid in self.readings.processes:
            return [SimpleNamespace(pid=pid, usedGpuMemory=used)
                    for pid, used in self.readings.processes[uuid]]
        if _key(handle) >> 24 == _KIND_MIG:
            return []
        return [SimpleNamespace(pid=p, usedGpuMemory=None)
                for p in self.sim.running_processes(self._gpu(handle))]

    def nvmlDeviceGetProcessUtilization(self, handle: Any, last_seen: int) -> list[Any]:
        """Per-process SM share (NVML: Not Supported on a MIG device; Not Found without a
        sample newer than ``last_seen``)."""
        if _key(handle) >> 24 == _KIND_MIG:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        stamp = last_seen + 1
        samples = [SimpleNamespace(pid=pid, smUtil=share, memUtil=0, timeStamp=stamp)
                   for pid, share in self.readings.sm_percent.items()]
        if not samples:
            raise _error(pynvml.NVML_ERROR_NOT_FOUND)
        return samples

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> list[Any]:
        raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)

    # ---- telemetry -----------------------------------------------------------------------
    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        self._physical_gpu(handle)
        return self.readings.power_mw

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        self._physical_gpu(handle)
        return self.readings.throttle_reasons

    def nvmlDeviceGetClockInfo(self, handle: Any, clock: int) -> int:
        self._physical_gpu(handle)
        if clock == pynvml.NVML_CLOCK_SM:
            return self.readings.sm_clock_mhz
        return self.readings.memory_clock_mhz

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        if self._mig_on(self._physical_gpu(handle)):
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        gpu, memory = self.readings.utilization
        return SimpleNamespace(gpu=gpu, memory=memory)

    # ---- GPU instances -------------------------------------------------------------------
    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle: Any, index: int, version: int = 2
                                            ) -> Any:
        gpu = self._gpu(handle)
        self._maybe_hidden(gpu, "profiles")
        if version == 2 and self.old_driver:
            raise _error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        for p in self.sim.gpu_instance_profiles(gpu):
            if p.index == index:
                info = (pynvml.c_nvmlGpuInstanceProfileInfo_v2_t() if version == 2
                        else pynvml.c_nvmlGpuInstanceProfileInfo_t())
                info.id, info.sliceCount, info.instanceCount = p.id, p.slice_count, \
                    p.instance_count
                info.memorySizeMB = p.memory_mb
                if version == 2:
                    info.name = f"MIG {p.name}".encode()
                return info
        beyond = index >= pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT
        raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT if beyond
                     else pynvml.NVML_ERROR_NOT_SUPPORTED)

    def _maybe_hidden(self, gpu: int, what: str) -> None:
        if self.hidden_without_mig == what and not self._mig_on(gpu):
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def _profile_by_id(self, gpu: int, profile_id: int) -> Any:
        for p in self.sim.gpu_instance_profiles(gpu):
            if p.id == profile_id:
                return p
        raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, handle: Any, profile_id: int,
                                                   placements: Any, count_ref: Any) -> int:
        self._maybe_hidden(self._gpu(handle), "placements")
        profile = self._profile_by_id(self._gpu(handle), profile_id)
        capacity = self._set_count(count_ref, len(profile.placements))
        if capacity < len(profile.placements):
            raise _error(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
        for k, slot in enumerate(profile.placements):
            placements[k].start, placements[k].size = slot.start, slot.size
        return pynvml.NVML_SUCCESS

    def nvmlDeviceGetGpuInstances(self, handle: Any, profile_id: int, out: Any,
                                  count_ref: Any) -> int:
        gpu = self._gpu(handle)
        self._profile_by_id(gpu, profile_id)
        found = [gi for gi in self._sim(self.sim.gpu_instances, gpu)
                 if gi.profile_id == profile_id]
        self._set_count(count_ref, len(found))
        for k, gi in enumerate(found):
            out[k] = self._handle(pynvml.c_nvmlGpuInstance_t, _KIND_GI, gpu, gi.id)
        return pynvml.NVML_SUCCESS

    def _gi(self, handle: Any) -> Any:
        gpu, gi_id, _ = self._decode(handle, _KIND_GI)
        for gi in self._sim(self.sim.gpu_instances, gpu):
            if gi.id == gi_id:
                return gpu, gi
        raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlGpuInstanceGetInfo(self, handle: Any) -> Any:
        _, gi = self._gi(handle)
        return SimpleNamespace(id=gi.id, profileId=gi.profile_id,
                               placement=SimpleNamespace(start=gi.start, size=gi.size))

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, handle: Any, profile_id: int,
                                                 placement: Any) -> Any:
        if type(placement).__name__ != "CArgObject":
            raise TypeError("placement must be passed by reference (ctypes.byref)")
        gpu = self._gpu(handle)
        slot = placement._obj
        gi = self._sim(self.sim.create_gpu_instance, gpu, profile_id, slot.start, slot.size)
        return self._handle(pynvml.c_nvmlGpuInstance_t, _KIND_GI, gpu, gi.id)

    def nvmlDeviceGetGpuInstanceById(self, handle: Any, gi_id: int) -> Any:
        gpu = self._gpu(handle)
        if not any(gi.id == gi_id for gi in self._sim(self.sim.gpu_instances, gpu)):
            raise _error(pynvml.NVML_ERROR_NOT_FOUND)
        return self._handle(pynvml.c_nvmlGpuInstance_t, _KIND_GI, gpu, gi_id)

    def nvmlGpuInstanceDestroy(self, handle: Any) -> int:
        gpu, gi = self._gi(handle)
        self._sim(self.sim.destroy_gpu_instance, gpu, gi.id)
        return pynvml.NVML_SUCCESS

    # ---- compute instances ---------------------------------------------------------------
    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, handle: Any, index: int,
                                                     engine: int, version: int = 2) -> Any:
        gpu, gi = self._gi(handle)
        gi_slices = self._profile_by_id(gpu, gi.profile_id).slice_count
        slices = _SLICES_FOR_COMPUTE_PROFILE.get(index)
        if engine != pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED or slices is None or \
                slices > gi_slices or slices == 6 or slices == 8:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        info = pynvml.c_nvmlComputeInstanceProfileInfo_v2_t()
        info.id, info.sliceCount, info.instanceCount = index, slices, gi_slices // slices
        return info

    def nvmlGpuInstanceGetComputeInstances(self, handle: Any, profile_id: int, out: Any,
                                           count_ref: Any) -> int:
        gpu, gi = self._gi(handle)
        found = [ci for ci in gi.compute_instances if ci.profile_id == profile_id]
        self._set_count(count_ref, len(found))
        for k, ci in enumerate(found):
            out[k] = self._handle(pynvml.c_nvmlComputeInstance_t, _KIND_CI, gpu, gi.id, ci.id)
        return pynvml.NVML_SUCCESS

    def nvmlGpuInstanceCreateComputeInstance(self, handle: Any, profile_id: int) -> Any:
        gpu, gi = self._gi(handle)
        slices = _SLICES_FOR_COMPUTE_PROFILE.get(profile_id)
        if slices is None:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        ci = self._sim(self.sim.create_compute_instance, gpu, gi.id, slices)
        return self._handle(pynvml.c_nvmlComputeInstance_t, _KIND_CI, gpu, gi.id, ci.id)

    def nvmlGpuInstanceGetComputeInstanceById(self, handle: Any, ci_id: int) -> Any:
        gpu, gi = self._gi(handle)
        if not any(ci.id == ci_id for ci in gi.compute_instances):
            raise _error(pynvml.NVML_ERROR_NOT_FOUND)
        return self._handle(pynvml.c_nvmlComputeInstance_t, _KIND_CI, gpu, gi.id, ci_id)

    def nvmlComputeInstanceGetInfo(self, handle: Any) -> Any:
        gpu, gi_id, ci_id = self._decode(handle, _KIND_CI)
        gi = next(g for g in self.sim.gpu_instances(gpu) if g.id == gi_id)
        ci = next(c for c in gi.compute_instances if c.id == ci_id)
        return SimpleNamespace(id=ci.id, profileId=ci.profile_id)

    def nvmlComputeInstanceDestroy(self, handle: Any) -> int:
        gpu, gi_id, ci_id = self._decode(handle, _KIND_CI)
        self._sim(self.sim.destroy_compute_instance, gpu, gi_id, ci_id)
        return pynvml.NVML_SUCCESS

    # ---- MIG devices ---------------------------------------------------------------------
    def _slots(self, gpu: int) -> dict[int, MigDevice]:
        """The MIG device in each occupied slot of ``gpu``, slots as described above."""
        live = {d.uuid: d for d in self.sim.mig_devices(gpu)}
        table = self._mig_slots.setdefault(gpu, {})
        for slot in [s for s, uuid in table.items() if uuid not in live]:
            del table[slot]
        for uuid in (u for u in live if u not in table.values()):
            table[min(set(range(len(table) + 1)) - set(table))] = uuid
        return {slot: live[uuid] for slot, uuid in table.items()}

    def _mig_handle(self, device: MigDevice) -> Any:
        return self._handle(pynvml.c_nvmlDevice_t, _KIND_MIG, device.gpu_index,
                            device.gpu_instance_id, device.compute_instance_id)

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        gpu = self._gpu(handle)
        model = self.sim.gpus()[gpu].model
        if model is None:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return model.compute_slices if self._mig_on(gpu) else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: int) -> Any:
        device = self._slots(self._gpu(handle)).get(index)
        if device is None:
            raise _error(pynvml.NVML_ERROR_NOT_FOUND)
        return self._mig_handle(device)

    def nvmlDeviceIsMigDeviceHandle(self, handle: Any) -> int:
        return int(_key(handle) >> 24 == _KIND_MIG)

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: Any) -> Any:
        gpu = self._decode(handle, _KIND_MIG)[0]
        return self._handle(pynvml.c_nvmlDevice_t, _KIND_DEVICE, gpu)

    def nvmlDeviceGetGpuInstanceId(self, handle: Any) -> int:
        return self._decode(handle, _KIND_MIG)[1]

    def nvmlDeviceGetComputeInstanceId(self, handle: Any) -> int:
        return self._decode(handle, _KIND_MIG)[2]
