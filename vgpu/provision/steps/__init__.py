"""The guest steps, by the names the plan lists them under (Plan.guest_steps). Importing
this package registers every step class (``@guest_step``) under its name."""

from __future__ import annotations

from vgpu import stepnames
from vgpu.provision.requirements import GuestRequirements
from vgpu.provision.step import REGISTRY, Step
from vgpu.provision.steps import gpuprobe, harness, image, mesh, mpi, nvidia, system

STEP_MODULES = (system, nvidia, mesh, harness, image, mpi, gpuprobe)


def build_steps(requirements: GuestRequirements) -> list[Step]:
    """Step objects in the requested order; OS facts always first (later steps use them)."""
    unknown = [n for n in requirements.steps if n not in REGISTRY]
    if unknown:
        raise ValueError(f"unknown guest step(s) {', '.join(unknown)}; known: "
                         f"{', '.join(stepnames.ALL)}")
    first = stepnames.OS_FACTS
    names = [first, *(n for n in requirements.steps if n != first)]
    return [REGISTRY[name].for_guest(requirements) for name in names]


__all__ = ["REGISTRY", "STEP_MODULES", "Step", "build_steps"]
