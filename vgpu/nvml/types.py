"""Plain data the NVML layer returns: what a GPU is, its MIG mode, profiles and instances.
Each has ``to_json`` so the remote entry point and the state file speak the same shapes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vgpu import mig


@dataclass(frozen=True)
class DriverInfo:
    driver_version: str
    cuda_version: str
    nvml_version: str


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    uuid: str
    pci_bus_id: str
    pci_device_id: int  # PCI device id alone (0x20B5), without the vendor half
    memory_mb: int
    model_key: str | None  # vgpu.mig catalogue key from the PCI device id, None if unknown

    @property
    def model(self) -> mig.GpuModel | None:
        return mig.GPU_MODELS.get(self.model_key) if self.model_key else None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["pci_device_id"] = f"0x{self.pci_device_id:04X}"
        return data


@dataclass(frozen=True)
class MigMode:
    current: bool
    pending: bool

    @property
    def reset_pending(self) -> bool:
        return self.current != self.pending

    def describe(self) -> str:
        now = "enabled" if self.current else "disabled"
        if self.reset_pending:
            later = "enabled" if self.pending else "disabled"
            return f"{now} ({later} after a GPU reset)"
        return now


@dataclass(frozen=True)
class PlacementSlot:
    start: int
    size: int


@dataclass(frozen=True)
class GpuInstanceProfile:
    """One GPU-instance profile as NVML reports it. ``index`` is the
    NVML_GPU_INSTANCE_PROFILE_* constant it was asked for; ``id`` is what every later call
    takes."""

    index: int
    id: int
    name: str  # "1g.10gb" (NVML's "MIG " prefix removed)
    slice_count: int  # compute slices
    instance_count: int  # max instances of this profile
    memory_mb: int
    placements: tuple[PlacementSlot, ...]
    placements_known: bool = True  # False: the driver lists none now (e.g. MIG mode off)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["placements"] = [[p.start, p.size] for p in self.placements]
        return data


@dataclass(frozen=True)
class ComputeInstance:
    id: int
    profile_id: int
    slice_count: int


@dataclass(frozen=True)
class GpuInstance:
    id: int
    profile_id: int
    start: int
    size: int
    compute_instances: tuple[ComputeInstance, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MigDevice:
    """A MIG device (one compute instance) as CUDA sees it: use ``uuid`` as
    CUDA_VISIBLE_DEVICES."""

    uuid: str
    gpu_index: int
    gpu_instance_id: int
    compute_instance_id: int
    memory_mb: int
    profile: str | None = None  # from the MIG device's name; needs no privileges to read


@dataclass
class GpuSnapshot:
    """Everything `vgpu mig status` shows for one GPU."""

    gpu: GpuInfo
    mig_mode: MigMode | None
    instances: list[GpuInstance] = field(default_factory=list)
    devices: list[MigDevice] = field(default_factory=list)
    profiles: list[GpuInstanceProfile] = field(default_factory=list)
    processes: list[int] = field(default_factory=list)
    note: str | None = None

    def profile_name(self, profile_id: int) -> str:
        for p in self.profiles:
            if p.id == profile_id:
                return p.name
        model = self.gpu.model
        if model is not None:
            try:
                return model.by_nvml_id(profile_id).name
            except KeyError:
                pass
        return f"profile-id-{profile_id}"

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu.to_json(),
            "mig_mode": None if self.mig_mode is None else {
                "current": self.mig_mode.current, "pending": self.mig_mode.pending},
            "instances": [{**gi.to_json(), "profile": self.profile_name(gi.profile_id)}
                          for gi in self.instances],
            "mig_devices": [asdict(d) for d in self.devices],
            "processes": self.processes,
            "note": self.note,
        }
