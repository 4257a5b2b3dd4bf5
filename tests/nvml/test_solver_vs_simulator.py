"""The solver (vgpu.mig.solve) and the simulated GPU agree: every layout the solver accepts
is creatable on the simulator through apply_layout, and no layout it refuses can be created
on the simulator in any placement. The simulator checks requests with its own rules (allowed
starts, overlaps, per-profile maximum, compute slices), not with the solver."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from vgpu import mig
from vgpu.nvml.errors import MigError
from vgpu.nvml.layout import apply_layout
from vgpu.nvml.simulator import SimulatedGpuBackend
from vgpu.nvml.spec import LayoutSpec, SliceSpec
from vgpu.nvml.state import StateStore

MODELS = [mig.GPU_MODELS["A100-80GB"], mig.GPU_MODELS["A30"]]


@st.composite
def requests(draw: st.DrawFn) -> tuple[mig.GpuModel, list[mig.MigProfile],
                                        mig.MigPlacement | None]:
    model = draw(st.sampled_from(MODELS))
    profiles = draw(st.lists(st.sampled_from(model.profiles), min_size=1, max_size=8))
    held = None
    if draw(st.booleans()):
        profile = draw(st.sampled_from(model.profiles))
        held = mig.MigPlacement(profile, draw(st.sampled_from(profile.shape.starts)),
                             owner="someone else")
    return model, profiles, held


def _creatable_somewhere(sim: SimulatedGpuBackend, profiles: list[mig.MigProfile]) -> bool:
    """Depth-first over every start of every instance, creating and destroying on the
    simulator; True as soon as all instances exist at once."""
    if not profiles:
        return True
    first, rest = profiles[0], profiles[1:]
    for start in first.shape.starts:
        try:
            gi = sim.create_gpu_instance(0, first.shape.nvml_id, start, first.memory_slices)
        except MigError:
            continue
        found = _creatable_somewhere(sim, rest)
        sim.destroy_gpu_instance(0, gi.id)
        if found:
            return True
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_solver_and_simulator_agree(case: tuple[mig.GpuModel, list[mig.MigProfile],
                                                mig.MigPlacement | None]) -> None:
    model, profiles, held = case
    sim = SimulatedGpuBackend([model.key], mig_enabled=True)
    occupied = []
    if held is not None:
        gi = sim.create_gpu_instance(0, held.profile.shape.nvml_id, held.start,
                                     held.profile.memory_slices)
        sim.create_compute_instance(0, gi.id)
        occupied = [held]
    result = mig.solve(model, profiles, occupied=occupied)

    event("refused" if not result.ok else "accepted")
    if not result.ok:
        assert not _creatable_somewhere(sim, profiles), result.reason
        return
    assert result.placements is not None
    spec = LayoutSpec(gpu=0, model=model.key, slices=tuple(
        SliceSpec(p.profile.name, p.start, f"i{k}") for k, p in enumerate(result.placements)))
    with tempfile.TemporaryDirectory() as tmp:
        applied = apply_layout(sim, spec, StateStore(path=Path(tmp) / "layout.json"))
    assert sorted((c.profile, c.start) for c in applied.created) == sorted(
        (p.profile.name, p.start) for p in result.placements)
    assert len(applied.devices) == len(profiles)
    if held is not None:
        assert any(gi.start == held.start and gi.profile_id == held.profile.shape.nvml_id
                   for gi in sim.gpu_instances(0))
