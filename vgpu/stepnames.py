"""The guest steps' names, as Plan.guest_steps lists them and `vgpu provision` runs them.
Standard library only, so the planner can use them: each name here is the ``name`` of
exactly one step class in vgpu.provision.steps, registered with ``@guest_step``."""

from __future__ import annotations

from typing import Final

OS_FACTS: Final = "os-facts"
BASE_PACKAGES: Final = "base-packages"
DOCKER: Final = "container-runtime:docker"
APPTAINER: Final = "container-runtime:apptainer"
NVIDIA_DRIVER: Final = "nvidia-driver"
CONTAINER_TOOLKIT: Final = "nvidia-container-toolkit"
VGPU_LICENSING: Final = "vgpu-licensing"
PASSWORDLESS_SSH: Final = "passwordless-ssh"
NODE_HARNESS: Final = "node-harness"
MPI_RUNTIME: Final = "mpi-runtime"
"""Open MPI and mpi4py: for scenarios that train over MPI (comm_backend: mpi)."""
HARNESS_IMAGE: Final = "harness-image"
VERIFY_GPU: Final = "verify-gpu"
GPU_PROBE: Final = "gpu-probe"
"""The step that runs CUDA in the harness container: jobs keep it for guests with a GPU."""

CONTAINER_RUNTIMES: Final[dict[str, str]] = {"docker": DOCKER, "apptainer": APPTAINER}
"""``guest.container_runtime`` -> the step that installs it."""

ALL: Final = (OS_FACTS, BASE_PACKAGES, DOCKER, APPTAINER, NVIDIA_DRIVER, CONTAINER_TOOLKIT,
              VGPU_LICENSING, PASSWORDLESS_SSH, NODE_HARNESS, HARNESS_IMAGE, MPI_RUNTIME,
              VERIFY_GPU, GPU_PROBE)
"""Every step name, in the order a plan lists them."""
