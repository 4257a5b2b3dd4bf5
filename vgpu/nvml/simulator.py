"""SimulatedGpuBackend: a simulated MIG-capable GPU for machines without one.

It follows the published geometry in vgpu.mig (profile ids, placements, maximum counts,
compute slices) but checks requests with its own rules, the way the driver does, so tests
that run the layout code against it are not the solver checking itself. It refuses what
the driver refuses, with the same MigError and NVML return code: overlaps, exhausted
profiles or compute slices -> Insufficient Resources; destroying an instance that still has
compute instances or processes -> In use by another client; instances with MIG off -> Not
Supported. A MIG mode change stays pending until ``reset`` (a simulated GPU reset).
A GPU without MIG (NON_MIG_GPUS, e.g. a T4) can sit beside them, as on machines that mix
GPUs: every MIG call on it answers Not Supported.

It can also stand for the GPUs a MIG-backed vGPU VM sees (``mig_backed_vgpu_guest``): one
GPU per vGPU, named by its vGPU type (``GRID A100D-1-10C``), MIG mode on, and under it the
MIG device of the GPU instance vSphere created for the VM, with its own ``MIG-`` UUID.
Inside the guest MIG mode and instances cannot be changed (Not Supported); listing the GPU
instances is refused the same way (the driver's answer there is unconfirmed: callers must
not depend on it, the MIG devices name their profile).

Its state can live in a JSON file (env VGPU_GPU_SIMULATOR_STATE) so separate processes
(CLI calls) see the same simulated GPU.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vgpu import mig
from vgpu.nvml import errors
from vgpu.nvml.backend import COMPUTE_PROFILE_FOR_SLICES, GpuBackend
from vgpu.nvml.errors import MigError
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

SIMULATED_DRIVER = DriverInfo(driver_version="550.127.05 (simulated)", cuda_version="12.4",
                              nvml_version="12.550.127.05 (simulated)")
_UUID_NAMESPACE = uuid.UUID("6f0b7a52-6d1e-4c55-9d1c-3b0f7e1a9c11")


@dataclass(frozen=True)
class NonMigGpu:
    display_name: str
    pci_device_id: int
    memory_gb: int


NON_MIG_GPUS: dict[str, NonMigGpu] = {"T4": NonMigGpu("Tesla T4", 0x1EB8, 16)}


@dataclass
class _SimCi:
    id: int
    profile_id: int
    slice_count: int
    uuid: str


@dataclass
class _SimGi:
    id: int
    profile_id: int
    start: int
    size: int
    cis: list[_SimCi] = field(default_factory=list)
    busy_pids: list[int] = field(default_factory=list)


@dataclass
class _SimGpu:
    index: int
    model_key: str
    uuid: str
    pci_bus_id: str
    mig_current: bool = False
    mig_pending: bool = False
    processes: list[int] = field(default_factory=list)
    instances: list[_SimGi] = field(default_factory=list)
    serial: int = 0  # counts instances ever created: recreated instances get new UUIDs
    vgpu_type: str | None = None  # set: a MIG-backed vGPU as its guest sees it

    @property
    def model(self) -> mig.GpuModel:
        return mig.GPU_MODELS[self.model_key]

    @property
    def mig_capable(self) -> bool:
        return self.model_key not in NON_MIG_GPUS

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> _SimGpu:
        gis = [_SimGi(**{**g, "cis": [_SimCi(**c) for c in g.get("cis", [])]})
               for g in data.get("instances", [])]
        return cls(**{**data, "instances": gis})


def parse_simulator_spec(spec: str) -> list[str]:
    """'A100-80GB' or 'A100-80GB,H100-80GB' or '2xA100-80GB' -> catalogue keys."""
    keys: list[str] = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        count = 1
        head, sep, rest = part.partition("x")
        if sep and head.isdigit():
            count, part = int(head), rest
        try:
            model = mig.gpu_model(part)
        except KeyError:
            raise ValueError(f"'{part}' is not a GPU model vgpu knows; use one of "
                             f"{', '.join(mig.gpu_model_names())}") from None
        keys += [model.key] * count
    if not keys:
        raise ValueError("empty GPU simulator spec; use e.g. A100-80GB")
    return keys


class SimulatedGpuBackend(GpuBackend):
    """Simulated GPUs: catalogue keys of vgpu.mig or of NON_MIG_GPUS (default one
    A100-80GB; ``[]`` a machine whose driver sees no GPU). ``state_file``: load from / save
    to this JSON after every change."""

    simulated = True

    def __init__(self, models: list[str] | None = None, *, state_file: Path | None = None,
                 mig_enabled: bool = False, privileged: bool = True) -> None:
        """``privileged=False`` acts like a non-root user: NVML lets those read MIG devices
        but not list, create or destroy GPU and compute instances."""
        self.state_file = state_file
        self.privileged = privileged
        if state_file is not None and state_file.exists():
            self._gpus = self._load(state_file)
            return
        keys = ["A100-80GB"] if models is None else models
        self._gpus = [
            _SimGpu(index=i, model_key=k,
                    uuid=f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'gpu/{i}/{k}')}",
                    pci_bus_id=f"00000000:{0x17 + 0x20 * i:02X}:00.0")
            for i, k in enumerate(keys)
        ]
        for g in self._gpus:
            g.mig_current = g.mig_pending = mig_enabled and g.mig_capable
        self._save()

    @classmethod
    def mig_backed_vgpu_guest(cls, vgpu_types: Sequence[str], model: str = "A100-80GB", *,
                              state_file: Path | None = None) -> SimulatedGpuBackend:
        """The GPUs of a VM with these MIG-backed vGPUs (``A100D-1-10C``, one GPU each) of
        ``model`` GPUs: each with the GPU instance and MIG device vSphere made for it."""
        gpu_model = mig.gpu_model(model)
        profiles = [mig.parse_mig_profile(t, gpu_model) for t in vgpu_types]
        sim = cls([gpu_model.key] * len(profiles), mig_enabled=True)
        for index, profile in enumerate(profiles):
            gi = sim.create_gpu_instance(index, profile.shape.nvml_id, profile.shape.starts[0],
                                         profile.memory_slices)
            sim.create_compute_instance(index, gi.id)
            board = vgpu_types[index].strip().split("-")[0].upper()
            sim._gpus[index].vgpu_type = profile.vgpu_type(
                board if board in gpu_model.board_codes else gpu_model.board)
        sim.state_file = state_file
        sim._save()
        return sim

    # ---- persistence ---------------------------------------------------------------------
    @staticmethod
    def _load(path: Path) -> list[_SimGpu]:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [_SimGpu.from_json(g) for g in data["gpus"]]

    def _save(self) -> None:
        if self.state_file is None:
            return
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"simulated_gpus": True, "gpus": [asdict(g) for g in self._gpus]},
                          indent=2)
        fd, tmp = tempfile.mkstemp(dir=self.state_file.parent, prefix=".simgpu-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)
        os.replace(tmp, self.state_file)

    # ---- the backend interface -----------------------------------------------------------
    @property
    def description(self) -> str:
        names = ", ".join(f"{g.index}: {g.model_key}" for g in self._gpus)
        where = f", state {self.state_file}" if self.state_file else ""
        return f"SIMULATED GPU (no NVIDIA driver used): {names}{where}"

    def driver_info(self) -> DriverInfo:
        return SIMULATED_DRIVER

    def gpus(self) -> list[GpuInfo]:
        return [self._info(g) for g in self._gpus]

    @staticmethod
    def _info(g: _SimGpu) -> GpuInfo:
        plain = NON_MIG_GPUS.get(g.model_key)
        if g.vgpu_type is not None:
            profile = mig.parse_mig_profile(g.vgpu_type, g.model)
            name, pci, memory_gb, key = (f"GRID {g.vgpu_type}", g.model.pci_device_ids[0],
                                         profile.memory_gb, g.model.key)
        elif plain is not None:
            name, pci, memory_gb, key = (plain.display_name, plain.pci_device_id,
                                         plain.memory_gb, None)
        else:
            model = g.model
            name, pci, memory_gb, key = (model.display_name, model.pci_device_ids[0],
                                         model.memory_gb, model.key)
        return GpuInfo(index=g.index, name=f"{name} (simulated)", uuid=g.uuid,
                       pci_bus_id=g.pci_bus_id, pci_device_id=pci, memory_mb=memory_gb * 1024,
                       model_key=key)

    def _gpu(self, gpu: int) -> _SimGpu:
        if not 0 <= gpu < len(self._gpus):
            raise MigError(errors.INVALID_ARGUMENT, f"GPU {gpu}",
                           f"the simulator has GPUs 0..{len(self._gpus) - 1}")
        return self._gpus[gpu]

    @staticmethod
    def _require_mig_capable(g: _SimGpu, operation: str) -> None:
        if not g.mig_capable:
            raise MigError(errors.NOT_SUPPORTED, f"{operation} on GPU {g.index}",
                           f"a {g.model_key} has no MIG")

    @staticmethod
    def _refuse_in_guest(g: _SimGpu, operation: str) -> None:
        if g.vgpu_type is not None:
            raise MigError(errors.NOT_SUPPORTED, f"{operation} on GPU {g.index}",
                           f"GPU {g.index} is the MIG-backed vGPU {g.vgpu_type}: vSphere "
                           "creates its GPU instance on the host")

    def mig_mode(self, gpu: int) -> MigMode:
        g = self._gpu(gpu)
        self._require_mig_capable(g, "read MIG mode")
        return MigMode(current=g.mig_current, pending=g.mig_pending)

    def set_mig_mode(self, gpu: int, enabled: bool) -> MigMode:
        g = self._gpu(gpu)
        self._require_mig_capable(g, "set MIG mode")
        self._refuse_in_guest(g, "set MIG mode")
        if not self.privileged:
            raise MigError(errors.NO_PERMISSION, f"set MIG mode on GPU {gpu}")
        if g.processes:
            raise MigError(errors.IN_USE, f"set MIG mode on GPU {gpu}",
                           f"processes {g.processes} use the GPU")
        if not enabled and g.instances:
            raise MigError(errors.IN_USE, f"disable MIG mode on GPU {gpu}",
                           f"{len(g.instances)} GPU instance(s) still exist")
        g.mig_pending = enabled
        self._save()
        return self.mig_mode(gpu)

    def reset(self, gpu: int) -> MigMode:
        """Simulated `nvidia-smi --gpu-reset`: the pending MIG mode becomes current."""
        g = self._gpu(gpu)
        if g.processes:
            raise MigError(errors.IN_USE, f"reset GPU {gpu}", f"processes {g.processes}")
        g.mig_current = g.mig_pending
        if not g.mig_current:
            g.instances.clear()
        self._save()
        return self.mig_mode(gpu)

    def set_processes(self, gpu: int, pids: list[int]) -> None:
        """Simulate other users' processes on the GPU (it is then busy)."""
        self._gpu(gpu).processes = list(pids)
        self._save()

    def set_instance_busy(self, gpu: int, gpu_instance_id: int, pids: list[int]) -> None:
        """Simulate processes running on one GPU instance's MIG device."""
        self._find_gi(self._gpu(gpu), gpu_instance_id, "mark busy").busy_pids = list(pids)
        self._save()

    def running_processes(self, gpu: int) -> list[int]:
        g = self._gpu(gpu)
        return sorted({*g.processes, *(p for gi in g.instances for p in gi.busy_pids)})

    def gpu_instance_profiles(self, gpu: int) -> list[GpuInstanceProfile]:
        g = self._gpu(gpu)
        if not g.mig_capable or g.vgpu_type is not None:
            return []
        return [GpuInstanceProfile(
            index=p.shape.nvml_index, id=p.shape.nvml_id, name=p.name,
            slice_count=p.compute_slices, instance_count=p.shape.max_count,
            memory_mb=p.memory_gb * 1024,
            placements=tuple(PlacementSlot(s, p.memory_slices) for s in p.shape.starts))
            for p in g.model.profiles]

    def gpu_instances(self, gpu: int) -> list[GpuInstance]:
        g = self._gpu(gpu)
        self._require_mig(g, "list GPU instances")
        return [self._public_gi(gi) for gi in sorted(g.instances, key=lambda x: x.id)]

    @staticmethod
    def _public_gi(gi: _SimGi) -> GpuInstance:
        return GpuInstance(id=gi.id, profile_id=gi.profile_id, start=gi.start, size=gi.size,
                           compute_instances=tuple(ComputeInstance(c.id, c.profile_id,
                                                                   c.slice_count)
                                                   for c in gi.cis))

    def _require_mig(self, g: _SimGpu, operation: str) -> None:
        self._require_mig_capable(g, operation)
        self._refuse_in_guest(g, operation)
        if not self.privileged:
            raise MigError(errors.NO_PERMISSION, f"{operation} on GPU {g.index}")
        if not g.mig_current:
            raise MigError(errors.NOT_SUPPORTED, f"{operation} on GPU {g.index}",
                           "MIG mode is not enabled")

    def create_gpu_instance(self, gpu: int, profile_id: int, start: int, size: int
                            ) -> GpuInstance:
        g = self._gpu(gpu)
        op = f"create GPU instance (profile id {profile_id}, start {start}) on GPU {gpu}"
        self._require_mig(g, op)
        try:
            profile = g.model.by_nvml_id(profile_id)
        except KeyError:
            raise MigError(errors.INVALID_ARGUMENT, op, "no such profile id") from None
        if start not in profile.shape.starts or size != profile.memory_slices:
            raise MigError(errors.INVALID_ARGUMENT, op,
                           f"{profile.name} takes placements "
                           f"{[(s, profile.memory_slices) for s in profile.shape.starts]}")
        end = start + size
        for gi in g.instances:
            if gi.start < end and start < gi.start + gi.size:
                raise MigError(errors.INSUFFICIENT_RESOURCES, op,
                               f"memory slices {start}..{end - 1} overlap GPU instance {gi.id}")
        same = sum(gi.profile_id == profile_id for gi in g.instances)
        if same >= profile.shape.max_count:
            raise MigError(errors.INSUFFICIENT_RESOURCES, op,
                           f"all {profile.shape.max_count} {profile.name} instances exist")
        used = sum(g.model.by_nvml_id(gi.profile_id).compute_slices for gi in g.instances)
        if used + profile.compute_slices > g.model.compute_slices:
            raise MigError(errors.INSUFFICIENT_RESOURCES, op,
                           f"{used} of {g.model.compute_slices} compute slices are taken")
        taken = {gi.id for gi in g.instances}
        new_id = next(i for i in range(1, 64) if i not in taken)
        gi = _SimGi(id=new_id, profile_id=profile_id, start=start, size=size)
        g.instances.append(gi)
        g.serial += 1
        self._save()
        return self._public_gi(gi)

    def _find_gi(self, g: _SimGpu, gi_id: int, operation: str) -> _SimGi:
        for gi in g.instances:
            if gi.id == gi_id:
                return gi
        raise MigError(errors.NOT_FOUND, f"{operation} on GPU {g.index}",
                       f"no GPU instance {gi_id}")

    def create_compute_instance(self, gpu: int, gpu_instance_id: int,
                                slice_count: int | None = None) -> ComputeInstance:
        g = self._gpu(gpu)
        op = f"create compute instance in GPU instance {gpu_instance_id}"
        self._require_mig(g, op)
        gi = self._find_gi(g, gpu_instance_id, op)
        gi_slices = g.model.by_nvml_id(gi.profile_id).compute_slices
        slices = gi_slices if slice_count is None else slice_count
        used = sum(c.slice_count for c in gi.cis)
        if slices not in COMPUTE_PROFILE_FOR_SLICES or slices > gi_slices:
            raise MigError(errors.INVALID_ARGUMENT, op,
                           f"no {slices}-slice compute profile in a {gi_slices}-slice instance")
        if used + slices > gi_slices:
            raise MigError(errors.INSUFFICIENT_RESOURCES, op,
                           f"{used} of {gi_slices} compute slices are taken")
        taken = {c.id for c in gi.cis}
        ci_id = next(i for i in range(0, 16) if i not in taken)
        g.serial += 1
        mig_uuid = f"MIG-{uuid.uuid5(_UUID_NAMESPACE, f'{g.uuid}/{gi.id}/{ci_id}/{g.serial}')}"
        ci = _SimCi(id=ci_id, profile_id=COMPUTE_PROFILE_FOR_SLICES[slices],
                    slice_count=slices, uuid=mig_uuid)
        gi.cis.append(ci)
        self._save()
        return ComputeInstance(ci.id, ci.profile_id, ci.slice_count)

    def destroy_compute_instance(self, gpu: int, gpu_instance_id: int,
                                 compute_instance_id: int) -> None:
        g = self._gpu(gpu)
        op = f"destroy compute instance {compute_instance_id} of GPU instance {gpu_instance_id}"
        self._require_mig(g, op)
        gi = self._find_gi(g, gpu_instance_id, op)
        if gi.busy_pids:
            raise MigError(errors.IN_USE, op, f"processes {gi.busy_pids} run on it")
        for ci in gi.cis:
            if ci.id == compute_instance_id:
                gi.cis.remove(ci)
                self._save()
                return
        raise MigError(errors.NOT_FOUND, op, f"no compute instance {compute_instance_id}")

    def destroy_gpu_instance(self, gpu: int, gpu_instance_id: int) -> None:
        g = self._gpu(gpu)
        op = f"destroy GPU instance {gpu_instance_id} on GPU {gpu}"
        self._require_mig(g, op)
        gi = self._find_gi(g, gpu_instance_id, op)
        if gi.cis or gi.busy_pids:
            raise MigError(errors.IN_USE, op,
                           f"it still has {len(gi.cis)} compute instance(s)" if gi.cis
                           else f"processes {gi.busy_pids} run on it")
        g.instances.remove(gi)
        self._save()

    def mig_devices(self, gpu: int) -> list[MigDevice]:
        g = self._gpu(gpu)
        if not g.mig_current:
            return []
        out = []
        for gi in sorted(g.instances, key=lambda x: x.id):
            profile = g.model.by_nvml_id(gi.profile_id)
            for ci in sorted(gi.cis, key=lambda c: c.id):
                # Compute instances of one GPU instance share its memory, as on a real GPU.
                out.append(MigDevice(uuid=ci.uuid, gpu_index=g.index, gpu_instance_id=gi.id,
                                     compute_instance_id=ci.id,
                                     memory_mb=profile.memory_gb * 1024, profile=profile.name))
        return out
