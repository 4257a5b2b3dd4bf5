"""Create and verify a planned MIG layout on one GPU through a GpuBackend.

Apply: check the GPU (model, MIG mode, pending reset), keep instances held by others
(counted as occupied; the solver moves planned slices around them if it must), create GPU
instances largest first at their placements (as the MIG User Guide and mig-parted do),
one compute instance filling each, then check the resulting MIG devices against the plan.
Everything created is recorded in the state file before the next step, so a failure half
way leaves a record `destroy` (vgpu.nvml.teardown) can act on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vgpu import mig
from vgpu.nvml.backend import GpuBackend
from vgpu.nvml.errors import LayoutError, MigError
from vgpu.nvml.preconditions import (
    Log,
    check_model,
    ensure_mig_enabled,
    find_gpu,
    name_of,
    profile_by_name,
    quiet,
)
from vgpu.nvml.spec import LayoutSpec, SliceSpec
from vgpu.nvml.state import CreatedInstance, LayoutState, SavedInstance, StateStore
from vgpu.nvml.teardown import destroy_created
from vgpu.nvml.types import GpuInstance, GpuInstanceProfile, MigDevice


@dataclass
class ApplyResult:
    gpu: int
    actions: list[str] = field(default_factory=list)
    created: list[CreatedInstance] = field(default_factory=list)
    devices: list[MigDevice] = field(default_factory=list)
    already_applied: bool = False
    dry_run: bool = False


def _targets(spec: LayoutSpec, wanted: list[SliceSpec], held: list[GpuInstance],
             profiles: list[GpuInstanceProfile], log: Log) -> list[SliceSpec] | str:
    """Placements for ``wanted`` (slices of ``spec``) beside the ``held`` instances: the
    planned starts where they are free, else the solver's; or why they cannot fit."""
    model = spec.gpu_model
    occupied = [mig.MigPlacement(model.profile(name_of(profiles, model, gi.profile_id)),
                              gi.start, owner=f"GPU instance {gi.id}") for gi in held]
    planned = [mig.MigPlacement(model.profile(s.profile), s.start, owner=s.owner) for s in wanted]
    fits_as_planned = not any(p.overlaps(o) for p in planned for o in occupied) and not any(
        a.overlaps(b) for i, a in enumerate(planned) for b in planned[i + 1:])
    if fits_as_planned and mig.is_placeable(model, [p.profile for p in planned],
                                            occupied=occupied):
        return list(wanted)
    result = mig.solve(model, [p.profile for p in planned], occupied=occupied)
    if not result.ok or result.placements is None:
        text = result.reason or "no placement"
        if result.suggestions:
            text += "; nearest valid: " + "; ".join(
                f"{s.description} ({' + '.join(s.profiles)})" for s in result.suggestions)
        return text
    moved = [SliceSpec(s.profile, pl.start, s.owner)
             for s, pl in zip(wanted, result.placements, strict=True)]
    for old, new in zip(wanted, moved, strict=True):
        if old.start != new.start:
            log(f"note: {new.owner} ({new.profile}) goes to start {new.start} instead of the "
                f"planned {old.start}: held instances occupy the planned slices")
    return moved


def _creation_order(slices: list[SliceSpec], model: mig.GpuModel) -> list[SliceSpec]:
    def key(s: SliceSpec) -> tuple[int, int, int]:
        p = model.profile(s.profile)
        return (-p.memory_slices, -p.compute_slices, s.start)
    return sorted(slices, key=key)


def apply_layout(backend: GpuBackend, spec: LayoutSpec, store: StateStore, *,
                 enable_mig: bool = False, replace_existing: bool = False,
                 dry_run: bool = False, source: str = "scenario", log: Log = quiet
                 ) -> ApplyResult:
    gpu, model = spec.gpu, spec.gpu_model
    info = find_gpu(backend, gpu)
    check_model(info, spec, source)
    state = _state_for(store, gpu, info.uuid, model.key, backend.simulated, spec.scenario)
    result = ApplyResult(gpu=gpu, dry_run=dry_run)
    result.actions += ensure_mig_enabled(backend, gpu, enable=enable_mig, dry_run=dry_run,
                                         state=state, store=store, log=log)
    if dry_run and result.actions:  # MIG would be switched on: nothing else to read yet
        result.actions += [f"would create {s.profile}@{s.start} for {s.owner}"
                           for s in _creation_order(list(spec.slices), model)]
        return result
    profiles = backend.gpu_instance_profiles(gpu)
    existing = backend.gpu_instances(gpu)
    _take_stock(state, existing, profiles, model, log)
    ours = [gi for gi in existing if state.is_ours(gi)]
    foreign = [gi for gi in existing if not state.is_ours(gi)]

    recorded = {(c.owner, c.profile) for c in state.created}
    missing = [s for s in spec.slices if (s.owner, s.profile) not in recorded]
    keep_ours = bool(ours) and recorded <= {(s.owner, s.profile) for s in spec.slices}
    if keep_ours and not missing:
        devices, problems = verify_layout(backend, gpu, state.created)
        if not problems:
            result.already_applied = True
            result.created, result.devices = list(state.created), devices
            result.actions.append(f"GPU {gpu} already has this layout; nothing to do")
            return result
        keep_ours = False
    # Instances of ours that belong to this layout stay; the missing ones go beside them.
    targets = _targets(spec, missing, foreign + ours, profiles, log) if keep_ours else None
    if isinstance(targets, list):
        result.actions += [f"kept {c.profile}@{c.start} for {c.owner}" for c in state.created]
    else:  # an earlier layout of ours that differs from this one (or blocks it) makes room
        if ours:
            result.actions += _clear_ours(backend, gpu, state, store, dry_run, log)
        targets = _targets(spec, list(spec.slices), foreign, profiles, log)
    if isinstance(targets, str):
        if not replace_existing:
            held = ", ".join(f"{name_of(profiles, model, gi.profile_id)}@{gi.start} "
                             f"(GPU instance {gi.id})" for gi in foreign)
            raise LayoutError(f"the layout does not fit beside the instances already on GPU "
                              f"{gpu} ({held}): {targets}. Free them, or rerun with "
                              "--replace-existing to destroy them (they are saved; `vgpu mig "
                              "destroy --restore` puts them back)")
        targets = list(spec.slices)
        result.actions += _replace_foreign(backend, gpu, foreign, profiles, model, state,
                                           store, dry_run)
    order = _creation_order(targets, model)
    if dry_run:
        result.actions += [f"would create {s.profile}@{s.start} for {s.owner}" for s in order]
        return result
    state.scenario = spec.scenario
    _create_all(backend, gpu, order, profiles, state, store, result)
    return result


def _state_for(store: StateStore, gpu: int, gpu_uuid: str, model: str, simulated: bool,
               scenario: str | None) -> LayoutState:
    state = store.load(gpu)
    if state is None:
        return LayoutState(gpu_index=gpu, gpu_uuid=gpu_uuid, gpu_model=model,
                           simulated=simulated, scenario=scenario)
    if state.gpu_uuid != gpu_uuid:
        raise LayoutError(f"{store.file_for(gpu)} records a layout on another GPU "
                          f"({state.gpu_uuid}, this is {gpu_uuid}); move it away or use "
                          "--state-file")
    return state


def _take_stock(state: LayoutState, existing: list[GpuInstance],
                profiles: list[GpuInstanceProfile], model: mig.GpuModel, log: Log) -> None:
    """Remember what was on the GPU before vgpu's first layout; forget records of vgpu's
    instances that someone removed since."""
    if not (state.created or state.before):
        state.before = [SavedInstance.of(gi, name_of(profiles, model, gi.profile_id))
                        for gi in existing]
    live = {(gi.id, gi.profile_id, gi.start) for gi in existing}
    for c in [c for c in state.created if (c.gpu_instance_id, c.profile_id, c.start) not in live]:
        log(f"note: {c.profile}@{c.start} ({c.owner}) that vgpu created is gone; forgotten")
        state.created.remove(c)


def _create_all(backend: GpuBackend, gpu: int, order: list[SliceSpec],
                profiles: list[GpuInstanceProfile], state: LayoutState, store: StateStore,
                result: ApplyResult) -> None:
    """Create in order, then verify every recorded instance and record its MIG UUID."""
    for s in order:
        record = _create_one(backend, gpu, s, profiles, state, store)
        result.actions.append(f"created {s.profile}@{s.start} for {s.owner} (GPU instance "
                              f"{record.gpu_instance_id}, compute instance "
                              f"{record.compute_instance_id})")
    devices, problems = verify_layout(backend, gpu, state.created)
    if problems:
        raise LayoutError(f"GPU {gpu}: the layout was created but does not verify: "
                          + "; ".join(problems))
    for record, device in zip(state.created, devices, strict=True):  # no problems: 1:1
        record.uuid = device.uuid
    store.save(state)
    result.created, result.devices = list(state.created), devices


def _clear_ours(backend: GpuBackend, gpu: int, state: LayoutState, store: StateStore,
                dry_run: bool, log: Log) -> list[str]:
    if dry_run:
        return [f"would destroy earlier vgpu instance {c.profile}@{c.start}"
                for c in state.created]
    cleared = destroy_created(backend, gpu, state, store, log)
    if cleared.left:
        raise LayoutError(f"GPU {gpu}: the earlier vgpu layout could not be removed: "
                          + "; ".join(cleared.left) + ". Stop the processes on those MIG "
                          "devices and run this again")
    return cleared.actions


def _replace_foreign(backend: GpuBackend, gpu: int, foreign: list[GpuInstance],
                     profiles: list[GpuInstanceProfile], model: mig.GpuModel,
                     state: LayoutState, store: StateStore, dry_run: bool) -> list[str]:
    actions = []
    for gi in foreign:
        saved = SavedInstance.of(gi, name_of(profiles, model, gi.profile_id))
        if dry_run:
            actions.append(f"would destroy held instance {saved.describe()} (saved)")
            continue
        state.replaced.append(saved)
        store.save(state)
        for ci in gi.compute_instances:
            backend.destroy_compute_instance(gpu, gi.id, ci.id)
        backend.destroy_gpu_instance(gpu, gi.id)
        actions.append(f"destroyed held instance {saved.describe()} (saved for --restore)")
    return actions


def _create_one(backend: GpuBackend, gpu: int, s: SliceSpec,
                profiles: list[GpuInstanceProfile], state: LayoutState, store: StateStore
                ) -> CreatedInstance:
    profile = profile_by_name(profiles, s.profile, gpu)
    size = next((p.size for p in profile.placements if p.start == s.start), None)
    if size is None:
        raise LayoutError(f"the driver offers {s.profile} on GPU {gpu} at starts "
                          f"{[p.start for p in profile.placements]}, not {s.start}; compare "
                          "with `vgpu mig verify-catalogue`")
    try:
        gi = backend.create_gpu_instance(gpu, profile.id, s.start, size)
    except MigError as exc:
        raise LayoutError(f"creating {s.profile}@{s.start} for {s.owner} on GPU {gpu} failed: "
                          f"{exc}. The instances created so far are recorded; `vgpu mig "
                          "destroy` removes them") from None
    record = CreatedInstance(owner=s.owner, profile=s.profile, profile_id=profile.id,
                             start=s.start, size=size, gpu_instance_id=gi.id)
    state.created.append(record)
    store.save(state)
    try:
        ci = backend.create_compute_instance(gpu, gi.id)
    except MigError as exc:
        raise LayoutError(f"creating the compute instance of {s.profile}@{s.start} for "
                          f"{s.owner} on GPU {gpu} failed: {exc}. The instances created so "
                          "far are recorded; `vgpu mig destroy` removes them") from None
    record.compute_instance_id = ci.id
    store.save(state)
    return record


def verify_layout(backend: GpuBackend, gpu: int, created: list[CreatedInstance]
                  ) -> tuple[list[MigDevice], list[str]]:
    """The MIG devices of ``created`` and every way the GPU differs from the record."""
    problems: list[str] = []
    instances = {gi.id: gi for gi in backend.gpu_instances(gpu)}
    devices = backend.mig_devices(gpu)
    by_ids = {(d.gpu_instance_id, d.compute_instance_id): d for d in devices}
    mine: list[MigDevice] = []
    for c in created:
        gi = instances.get(c.gpu_instance_id)
        label = f"{c.owner} ({c.profile}@{c.start})"
        if gi is None or (gi.profile_id, gi.start, gi.size) != (c.profile_id, c.start, c.size):
            problems.append(f"{label}: GPU instance {c.gpu_instance_id} is missing or changed")
            continue
        cis = [ci for ci in gi.compute_instances if ci.id == c.compute_instance_id]
        if not cis:
            problems.append(f"{label}: compute instance {c.compute_instance_id} is missing")
            continue
        device = by_ids.get((gi.id, cis[0].id))
        if device is None or not device.uuid.startswith("MIG-"):
            problems.append(f"{label}: no MIG device for GPU instance {gi.id}")
            continue
        mine.append(device)
    return mine, problems
