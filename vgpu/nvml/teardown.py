"""Removing a layout: only the instances vgpu created (as recorded in the state file), and
with ``restore`` putting back what it replaced and switching MIG mode off again if vgpu
switched it on."""

from __future__ import annotations

from dataclasses import dataclass, field

from vgpu.nvml.backend import GpuBackend
from vgpu.nvml.errors import LayoutError, MigError
from vgpu.nvml.preconditions import RESET_HELP, Log, find_gpu, quiet
from vgpu.nvml.state import CreatedInstance, LayoutState, StateStore


@dataclass
class DestroyResult:
    gpu: int
    actions: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)


def destroy_created(backend: GpuBackend, gpu: int, state: LayoutState, store: StateStore,
                    log: Log) -> DestroyResult:
    """Destroy the recorded instances (compute instances first); what cannot go stays in
    the record and in ``left`` with the reason."""
    result = DestroyResult(gpu=gpu)
    instances = {gi.id: gi for gi in backend.gpu_instances(gpu)}
    kept: list[CreatedInstance] = []
    for c in list(state.created):
        gi = instances.get(c.gpu_instance_id)
        label = f"{c.profile}@{c.start} ({c.owner})"
        if gi is None or not state.is_ours(gi):
            result.actions.append(f"{label}: already gone")
            continue
        others = [ci for ci in gi.compute_instances if ci.id != c.compute_instance_id]
        if others:
            log(f"warning: {label} holds compute instances vgpu did not create; left in place")
            result.left.append(f"{label}: holds compute instances vgpu did not create")
            kept.append(c)
            continue
        try:
            for ci in gi.compute_instances:
                backend.destroy_compute_instance(gpu, gi.id, ci.id)
            backend.destroy_gpu_instance(gpu, gi.id)
        except MigError as exc:
            result.left.append(f"{label}: {exc}")
            kept.append(c)
            continue
        result.actions.append(f"destroyed {label}")
    state.created = kept
    store.save(state)
    return result


def destroy_layout(backend: GpuBackend, gpu: int, store: StateStore, *, restore: bool = False,
                   log: Log = quiet) -> DestroyResult:
    """Remove the instances vgpu created on ``gpu``; with ``restore`` also put back the
    instances it replaced and switch MIG off again if vgpu switched it on."""
    info = find_gpu(backend, gpu)
    state = store.load(gpu)
    if state is None:
        return DestroyResult(gpu=gpu, actions=[f"no layout recorded for GPU {gpu} in "
                                               f"{store.file_for(gpu)}; nothing to destroy"])
    if state.gpu_uuid != info.uuid:
        raise LayoutError(f"{store.file_for(gpu)} records a layout on another GPU "
                          f"({state.gpu_uuid}); nothing destroyed")
    mode = backend.mig_mode(gpu)
    result = DestroyResult(gpu=gpu)
    if mode.current:
        result = destroy_created(backend, gpu, state, store, log)
    if result.left:
        raise LayoutError(f"GPU {gpu}: could not destroy " + "; ".join(result.left)
                          + ". Stop the processes on those MIG devices and run this again")
    if restore:
        result.actions += _restore(backend, gpu, state, store)
    store.remove(gpu)
    return result


def _restore(backend: GpuBackend, gpu: int, state: LayoutState, store: StateStore
             ) -> list[str]:
    actions: list[str] = []
    mode = backend.mig_mode(gpu)
    if mode.current:
        present = {(gi.profile_id, gi.start) for gi in backend.gpu_instances(gpu)}
        saved = [*state.before, *state.replaced]
        for s in sorted(saved, key=lambda s: -s.size):
            if (s.profile_id, s.start) in present:
                continue
            gi = backend.create_gpu_instance(gpu, s.profile_id, s.start, s.size)
            for slices in s.compute_slices:
                backend.create_compute_instance(gpu, gi.id, slices)
            actions.append(f"restored {s.profile}@{s.start} as GPU instance {gi.id} "
                           f"(a new MIG UUID)")
            present.add((s.profile_id, s.start))
        state.replaced = []
        store.save(state)
    if state.mig_enabled_by_vgpu and mode.pending:
        remaining = backend.gpu_instances(gpu) if mode.current else []
        if remaining:
            actions.append(f"MIG mode left on: GPU {gpu} has instances that were there before")
        else:
            mode = backend.set_mig_mode(gpu, False)
            actions.append(f"MIG mode on GPU {gpu} set back to disabled"
                           + (f"; {RESET_HELP.format(gpu=gpu)} to finish"
                              if mode.reset_pending else ""))
    return actions
