"""NvmlBackend: the real GPU through pynvml (nvidia-ml-py).

The classic trap is the profile index vs the profile id: nvmlDeviceGetGpuInstanceProfileInfo
takes the NVML_GPU_INSTANCE_PROFILE_* index and returns ``info.id``; placements, instance
lists and creation all take that id. The same holds for compute-instance profiles.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from vgpu import mig
from vgpu.nvml import errors
from vgpu.nvml.backend import COMPUTE_PROFILE_FOR_SLICES, GpuBackend
from vgpu.nvml.errors import MigError, NvmlUnavailable
from vgpu.nvml.types import (
    ComputeInstance,
    DriverInfo,
    GpuInfo,
    GpuInstance,
    GpuInstanceProfile,
    MigDevice,
    MigMode,
    PlacementSlot,
)

T = TypeVar("T")
_MAX_PLACEMENTS = 32  # more than any GPU's slots; NVML fills up to this and returns the count
_SKIP_PROFILE = (errors.NOT_SUPPORTED, errors.INVALID_ARGUMENT, errors.NOT_FOUND)
_MIB = 1024 * 1024
_FUNCTION_NOT_FOUND = 13


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _profile_name(raw: Any) -> str:
    name = _text(raw).strip()
    return name[4:] if name.upper().startswith("MIG ") else name


def _mig_profile_from_name(name: str) -> str | None:
    """'NVIDIA A100-SXM4-80GB MIG 1g.10gb' -> '1g.10gb'."""
    _, sep, profile = name.partition("MIG ")
    return profile.strip() or None if sep else None


def load_nvml() -> ModuleType:
    """pynvml, initialised. Raises NvmlUnavailable (never a traceback) when the module, the
    library or the driver is missing."""
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable(f"no NVIDIA driver access: nvidia-ml-py is not installed "
                              f"({exc})") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"no NVIDIA driver: nvmlInit failed: {exc}") from None
    except OSError as exc:
        raise NvmlUnavailable(f"no NVIDIA driver: cannot load NVML: {exc}") from None
    return pynvml


class NvmlBackend(GpuBackend):
    """``nvml``: an initialised pynvml module, or anything with its interface (default:
    load_nvml())."""

    simulated = False

    def __init__(self, nvml: Any = None) -> None:
        self.nvml = nvml if nvml is not None else load_nvml()
        self._profiles: dict[int, list[GpuInstanceProfile]] = {}

    # ---- helpers -------------------------------------------------------------------------
    def _call(self, operation: str, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        except self.nvml.NVMLError as exc:
            raise MigError(int(exc.value), operation) from None

    def _handle(self, gpu: int) -> Any:
        return self._call(f"open GPU {gpu}", self.nvml.nvmlDeviceGetHandleByIndex, gpu)

    def _gi_handle(self, gpu: int, gi_id: int) -> Any:
        return self._call(f"find GPU instance {gi_id} on GPU {gpu}",
                          self.nvml.nvmlDeviceGetGpuInstanceById, self._handle(gpu), gi_id)

    # ---- the backend interface -----------------------------------------------------------
    @property
    def description(self) -> str:
        info = self.driver_info()
        return f"NVML (driver {info.driver_version}, CUDA {info.cuda_version})"

    def driver_info(self) -> DriverInfo:
        n = self.nvml
        cuda = self._call("read CUDA driver version", n.nvmlSystemGetCudaDriverVersion)
        return DriverInfo(
            driver_version=_text(self._call("read driver version", n.nvmlSystemGetDriverVersion)),
            cuda_version=f"{cuda // 1000}.{cuda % 1000 // 10}",
            nvml_version=_text(self._call("read NVML version", n.nvmlSystemGetNVMLVersion)))

    def gpus(self) -> list[GpuInfo]:
        n = self.nvml
        out: list[GpuInfo] = []
        for index in range(self._call("count GPUs", n.nvmlDeviceGetCount)):
            h = self._handle(index)
            pci = self._call(f"read PCI info of GPU {index}", n.nvmlDeviceGetPciInfo, h)
            device_id = int(pci.pciDeviceId) >> 16  # low half is the vendor (0x10DE)
            model = mig.gpu_model_for_pci(device_id)
            memory = self._call(f"read memory of GPU {index}", n.nvmlDeviceGetMemoryInfo, h)
            out.append(GpuInfo(
                index=index, name=_text(self._call("read name", n.nvmlDeviceGetName, h)),
                uuid=_text(self._call("read UUID", n.nvmlDeviceGetUUID, h)),
                pci_bus_id=_text(pci.busId), pci_device_id=device_id,
                memory_mb=int(memory.total) // _MIB, model_key=model.key if model else None))
        return out

    def mig_mode(self, gpu: int) -> MigMode:
        current, pending = self._call(f"read MIG mode of GPU {gpu}",
                                      self.nvml.nvmlDeviceGetMigMode, self._handle(gpu))
        return MigMode(current=bool(current), pending=bool(pending))

    def set_mig_mode(self, gpu: int, enabled: bool) -> MigMode:
        n = self.nvml
        mode = n.NVML_DEVICE_MIG_ENABLE if enabled else n.NVML_DEVICE_MIG_DISABLE
        self._call(f"set MIG mode on GPU {gpu}", n.nvmlDeviceSetMigMode, self._handle(gpu), mode)
        return self.mig_mode(gpu)

    def running_processes(self, gpu: int) -> list[int]:
        n = self.nvml
        handles = [self._handle(gpu)] + [self._mig_handle(gpu, i) for i in
                                         range(self._max_mig_devices(gpu))]
        pids: set[int] = set()
        for h in (h for h in handles if h is not None):
            for query in (n.nvmlDeviceGetComputeRunningProcesses,
                          n.nvmlDeviceGetGraphicsRunningProcesses):
                try:
                    pids.update(int(p.pid) for p in query(h))
                except n.NVMLError:
                    continue  # not supported on this handle; the other query still counts
        return sorted(pids)

    def gpu_instance_profiles(self, gpu: int) -> list[GpuInstanceProfile]:
        if gpu in self._profiles:
            return self._profiles[gpu]
        n = self.nvml
        h = self._handle(gpu)
        out: list[GpuInstanceProfile] = []
        for index in range(n.NVML_GPU_INSTANCE_PROFILE_COUNT):
            info = self._profile_info(gpu, h, index)
            if info is None:
                continue  # this GPU has no profile at that index
            placements = self._placements(gpu, h, int(info.id))
            out.append(GpuInstanceProfile(
                index=index, id=int(info.id), name=self._name(gpu, info),
                slice_count=int(info.sliceCount), instance_count=int(info.instanceCount),
                memory_mb=int(info.memorySizeMB), placements=placements or (),
                placements_known=placements is not None))
        if all(p.placements_known for p in out):
            self._profiles[gpu] = out  # complete: keep for this session
        return out

    def _profile_info(self, gpu: int, h: Any, index: int) -> Any | None:
        n = self.nvml
        for version in (2, 1):  # v1 for drivers before the v2 call; it carries no name
            try:
                return n.nvmlDeviceGetGpuInstanceProfileInfo(h, index, version)
            except n.NVMLError as exc:
                code = int(exc.value)
                if code == _FUNCTION_NOT_FOUND and version == 2:
                    continue
                if code in _SKIP_PROFILE:
                    return None
                raise MigError(code, f"read GPU-instance profile index {index} on GPU "
                               f"{gpu}") from None
        return None

    def _name(self, gpu: int, info: Any) -> str:
        raw = getattr(info, "name", None)
        if raw:
            return _profile_name(raw)
        model = mig.GPU_MODELS.get(self.gpus()[gpu].model_key or "")
        if model is not None:
            try:
                return model.by_nvml_id(int(info.id)).name
            except KeyError:
                pass
        return f"{int(info.sliceCount)}g.{round(int(info.memorySizeMB) / 1024)}gb"

    def _placements(self, gpu: int, h: Any, profile_id: int
                    ) -> tuple[PlacementSlot, ...] | None:
        """None where the driver lists no placements now (some do not with MIG mode off)."""
        n = self.nvml
        slots = (n.c_nvmlGpuInstancePlacement_t * _MAX_PLACEMENTS)()
        count = ctypes.c_uint(_MAX_PLACEMENTS)
        try:
            n.nvmlDeviceGetGpuInstancePossiblePlacements(h, profile_id, slots,
                                                         ctypes.byref(count))
        except n.NVMLError as exc:
            if int(exc.value) in (errors.NOT_SUPPORTED, errors.INVALID_STATE):
                return None
            raise MigError(int(exc.value), f"read placements of profile id {profile_id} on "
                           f"GPU {gpu}") from None
        return tuple(PlacementSlot(int(slots[i].start), int(slots[i].size))
                     for i in range(count.value))

    def gpu_instances(self, gpu: int) -> list[GpuInstance]:
        n = self.nvml
        h = self._handle(gpu)
        out: list[GpuInstance] = []
        for profile in self.gpu_instance_profiles(gpu):
            # NVML fills as many handles as exist and takes no size: give it ample room.
            handles = (n.c_nvmlGpuInstance_t * _MAX_PLACEMENTS)()
            count = ctypes.c_uint(0)
            self._call(f"list {profile.name} GPU instances on GPU {gpu}",
                       n.nvmlDeviceGetGpuInstances, h, profile.id, handles, ctypes.byref(count))
            for k in range(count.value):
                out.append(self._gpu_instance(gpu, handles[k]))
        return sorted(out, key=lambda gi: gi.id)

    def _gpu_instance(self, gpu: int, gi: Any) -> GpuInstance:
        info = self._call(f"read GPU instance on GPU {gpu}", self.nvml.nvmlGpuInstanceGetInfo, gi)
        return GpuInstance(id=int(info.id), profile_id=int(info.profileId),
                           start=int(info.placement.start), size=int(info.placement.size),
                           compute_instances=tuple(self._compute_instances(gpu, gi)))

    def _compute_profiles(self, gi: Any) -> list[tuple[int, Any]]:
        """(NVML_COMPUTE_INSTANCE_PROFILE_* index, profile info) for each profile offered."""
        n = self.nvml
        out = []
        for index in range(n.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
            try:
                out.append((index, n.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                    gi, index, n.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)))
            except n.NVMLError as exc:
                if int(exc.value) not in _SKIP_PROFILE:
                    raise MigError(int(exc.value), "read compute-instance profiles") from None
        return out

    def _compute_instances(self, gpu: int, gi: Any) -> list[ComputeInstance]:
        n = self.nvml
        out: list[ComputeInstance] = []
        for _, profile in self._compute_profiles(gi):
            handles = (n.c_nvmlComputeInstance_t * _MAX_PLACEMENTS)()
            count = ctypes.c_uint(0)
            self._call(f"list compute instances on GPU {gpu}",
                       n.nvmlGpuInstanceGetComputeInstances, gi, int(profile.id), handles,
                       ctypes.byref(count))
            for k in range(count.value):
                info = self._call("read compute instance", n.nvmlComputeInstanceGetInfo,
                                  handles[k])
                out.append(ComputeInstance(int(info.id), int(info.profileId),
                                           int(profile.sliceCount)))
        return sorted(out, key=lambda c: c.id)

    def create_gpu_instance(self, gpu: int, profile_id: int, start: int, size: int
                            ) -> GpuInstance:
        n = self.nvml
        placement = n.c_nvmlGpuInstancePlacement_t(start, size)
        gi = self._call(f"create GPU instance (profile id {profile_id}, start {start}) on GPU "
                        f"{gpu}", n.nvmlDeviceCreateGpuInstanceWithPlacement, self._handle(gpu),
                        profile_id, ctypes.byref(placement))
        return self._gpu_instance(gpu, gi)

    def create_compute_instance(self, gpu: int, gpu_instance_id: int,
                                slice_count: int | None = None) -> ComputeInstance:
        gi = self._gi_handle(gpu, gpu_instance_id)
        op = f"create compute instance in GPU instance {gpu_instance_id} on GPU {gpu}"
        if slice_count is None:
            info = self._call(op, self.nvml.nvmlGpuInstanceGetInfo, gi)
            slice_count = next(p.slice_count for p in self.gpu_instance_profiles(gpu)
                               if p.id == int(info.profileId))
        offered = self._compute_profiles(gi)
        # The standard profile for that size first (a GPU may offer variants of one size).
        preferred = COMPUTE_PROFILE_FOR_SLICES.get(slice_count)
        offered.sort(key=lambda item: item[0] != preferred)
        profile = next((p for _, p in offered if int(p.sliceCount) == slice_count), None)
        if profile is None:
            raise MigError(errors.INVALID_ARGUMENT, op,
                           f"no {slice_count}-slice compute-instance profile")
        ci = self._call(op, self.nvml.nvmlGpuInstanceCreateComputeInstance, gi, int(profile.id))
        info = self._call(op, self.nvml.nvmlComputeInstanceGetInfo, ci)
        return ComputeInstance(int(info.id), int(info.profileId), slice_count)

    def destroy_compute_instance(self, gpu: int, gpu_instance_id: int,
                                 compute_instance_id: int) -> None:
        n = self.nvml
        gi = self._gi_handle(gpu, gpu_instance_id)
        op = f"destroy compute instance {compute_instance_id} of GPU instance {gpu_instance_id}"
        ci = self._call(op, n.nvmlGpuInstanceGetComputeInstanceById, gi, compute_instance_id)
        self._call(op, n.nvmlComputeInstanceDestroy, ci)

    def destroy_gpu_instance(self, gpu: int, gpu_instance_id: int) -> None:
        self._call(f"destroy GPU instance {gpu_instance_id} on GPU {gpu}",
                   self.nvml.nvmlGpuInstanceDestroy, self._gi_handle(gpu, gpu_instance_id))

    def _max_mig_devices(self, gpu: int) -> int:
        try:
            return int(self.nvml.nvmlDeviceGetMaxMigDeviceCount(self._handle(gpu)))
        except self.nvml.NVMLError:
            return 0  # no MIG on this GPU

    def _mig_handle(self, gpu: int, index: int) -> Any | None:
        try:
            return self.nvml.nvmlDeviceGetMigDeviceHandleByIndex(self._handle(gpu), index)
        except self.nvml.NVMLError:
            return None  # no MIG device at this index

    def mig_devices(self, gpu: int) -> list[MigDevice]:
        n = self.nvml
        out: list[MigDevice] = []
        for index in range(self._max_mig_devices(gpu)):
            h = self._mig_handle(gpu, index)
            if h is None:
                continue
            out.append(MigDevice(
                uuid=_text(self._call("read MIG device UUID", n.nvmlDeviceGetUUID, h)),
                gpu_index=gpu,
                gpu_instance_id=int(self._call("read GPU instance id",
                                               n.nvmlDeviceGetGpuInstanceId, h)),
                compute_instance_id=int(self._call("read compute instance id",
                                                   n.nvmlDeviceGetComputeInstanceId, h)),
                memory_mb=int(self._call("read MIG memory", n.nvmlDeviceGetMemoryInfo,
                                         h).total) // _MIB,
                profile=_mig_profile_from_name(
                    _text(self._call("read MIG device name", n.nvmlDeviceGetName, h)))))
        return sorted(out, key=lambda d: (d.gpu_instance_id, d.compute_instance_id))

    def close(self) -> None:
        with contextlib.suppress(self.nvml.NVMLError):  # already shut down
            self.nvml.nvmlShutdown()
