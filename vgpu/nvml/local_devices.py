"""The MIG devices of this machine for `vgpu bench`: one harness instance per device, each
with CUDA_VISIBLE_DEVICES=<uuid>. On the simulator the UUIDs are the simulator's, the CPU
does the work, and ``simulated`` says so (the bench record must carry it)."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu import mig
from vgpu.nvml import errors
from vgpu.nvml.backend import GpuBackend
from vgpu.nvml.errors import MigError, NvmlUnavailable
from vgpu.nvml.select import backend_for_this_machine
from vgpu.nvml.state import StateStore


@dataclass(frozen=True)
class MigDeviceInfo:
    uuid: str  # "MIG-..." for CUDA_VISIBLE_DEVICES
    profile: str  # "1g.10gb"
    gpu_index: int
    start: int | None  # first memory slice of its GPU instance; None when not root
    simulated: bool = False
    owner: str | None = None  # planned instance (e.g. bm6-4g) when `vgpu mig apply` made it


def mig_devices_for_bench(backend: GpuBackend | None = None, *,
                          store: StateStore | None = None,
                          only_created: bool = False) -> list[MigDeviceInfo]:
    """Every MIG device of every MIG-enabled GPU, by GPU then start. Empty when the machine
    has no GPU (and no simulator was asked for) or no GPU has MIG on. Devices that
    `vgpu mig apply` created carry their planned owner (from the layout state in
    ``store``, default the usual place); ``only_created`` leaves out all others."""
    store = store or StateStore()
    if backend is None:
        try:
            backend = backend_for_this_machine()
        except NvmlUnavailable:
            return []
    out: list[MigDeviceInfo] = []
    for gpu in backend.gpus():
        try:
            if not backend.mig_mode(gpu.index).current:
                continue
        except MigError:
            continue  # no MIG on this GPU
        names = {p.id: p.name for p in backend.gpu_instance_profiles(gpu.index)}
        model = mig.GPU_MODELS.get(gpu.model_key or "")
        try:
            instances = {gi.id: gi for gi in backend.gpu_instances(gpu.index)}
        except MigError as exc:
            if exc.code not in (errors.NO_PERMISSION, errors.NOT_SUPPORTED):
                raise
            # Listing needs root, and a MIG-backed vGPU guest may not list the instance
            # vSphere made for it; the MIG devices name their profile.
            instances = {}
        state = store.load(gpu.index)
        owners = {c.uuid: c.owner for c in state.created} if state is not None and \
            state.gpu_uuid == gpu.uuid else {}
        for device in backend.mig_devices(gpu.index):
            if only_created and device.uuid not in owners:
                continue
            gi = instances.get(device.gpu_instance_id)
            name = device.profile
            if gi is not None:
                name = names.get(gi.profile_id) or (
                    model.by_nvml_id(gi.profile_id).name if model else name)
            out.append(MigDeviceInfo(uuid=device.uuid, profile=name or "unknown",
                                     gpu_index=gpu.index, start=gi.start if gi else None,
                                     simulated=backend.simulated,
                                     owner=owners.get(device.uuid)))
    return sorted(out, key=lambda d: (d.gpu_index, -1 if d.start is None else d.start,
                                      d.uuid))
