"""The guest steps, by the names the plan lists them under (Plan.guest_steps)."""

from __future__ import annotations

from collections.abc import Callable

from vgpu.provision.requirements import GuestRequirements
from vgpu.provision.step import Step
from vgpu.provision.steps.harness import HarnessStep
from vgpu.provision.steps.mesh import MeshStep
from vgpu.provision.steps.nvidia import (
    ContainerToolkitStep,
    DriverStep,
    LicensingStep,
    VerifyGpuStep,
)
from vgpu.provision.steps.system import ApptainerStep, BasePackagesStep, DockerStep, OsFactsStep

STEP_FACTORIES: dict[str, Callable[[GuestRequirements], Step]] = {
    "os-facts": lambda r: OsFactsStep(),
    "base-packages": lambda r: BasePackagesStep(r.base_packages),
    "container-runtime:docker": lambda r: DockerStep(r.docker_package),
    "container-runtime:apptainer": lambda r: ApptainerStep(r.apptainer_package),
    "nvidia-driver": lambda r: DriverStep(),
    "nvidia-container-toolkit": lambda r: ContainerToolkitStep(),
    "vgpu-licensing": lambda r: LicensingStep(),
    "passwordless-ssh": lambda r: MeshStep(),
    "node-harness": lambda r: HarnessStep(),
    "verify-gpu": lambda r: VerifyGpuStep(),
}


def build_steps(requirements: GuestRequirements) -> list[Step]:
    """Step objects in the requested order; OS facts always first (later steps use them)."""
    unknown = [n for n in requirements.steps if n not in STEP_FACTORIES]
    if unknown:
        raise ValueError(f"unknown guest step(s) {', '.join(unknown)}; known: "
                         f"{', '.join(STEP_FACTORIES)}")
    names = ["os-facts", *(n for n in requirements.steps if n != "os-facts")]
    return [STEP_FACTORIES[name](requirements) for name in names]


__all__ = ["STEP_FACTORIES", "Step", "build_steps"]
