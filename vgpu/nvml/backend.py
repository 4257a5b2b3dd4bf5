"""The one interface the MIG layout code talks to. Two implementations: NvmlBackend (the
real GPU through pynvml) and SimulatedGpuBackend (a simulated GPU for machines without
one). Both raise vgpu.nvml.errors.MigError with NVML's return code when a call is refused.

Profile ids: every method takes and returns NVML's GPU-instance profile *id* (19 for a
1g.10gb on an A100), never the NVML_GPU_INSTANCE_PROFILE_* *index* (0 for the same
profile). Only ``gpu_instance_profiles`` deals in indexes, and it reports both.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from vgpu.nvml.types import (
    ComputeInstance,
    DriverInfo,
    GpuInfo,
    GpuInstance,
    GpuInstanceProfile,
    MigDevice,
    MigMode,
)

# NVML_COMPUTE_INSTANCE_PROFILE_* index for a compute instance of N compute slices (the
# simulator also uses it as the compute-instance profile id, as current drivers do).
COMPUTE_PROFILE_FOR_SLICES = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}


class GpuBackend(ABC):
    simulated: bool = False

    @property
    @abstractmethod
    def description(self) -> str:
        """One line for output: which backend, which driver / which simulated GPUs."""

    @abstractmethod
    def driver_info(self) -> DriverInfo: ...

    @abstractmethod
    def gpus(self) -> list[GpuInfo]: ...

    @abstractmethod
    def mig_mode(self, gpu: int) -> MigMode:
        """Raises MigError(NOT_SUPPORTED) on a GPU without MIG."""

    @abstractmethod
    def set_mig_mode(self, gpu: int, enabled: bool) -> MigMode:
        """Ask for MIG on/off; the returned mode shows whether a GPU reset is still needed."""

    @abstractmethod
    def running_processes(self, gpu: int) -> list[int]:
        """PIDs of compute and graphics processes on the GPU (or its MIG devices)."""

    @abstractmethod
    def gpu_instance_profiles(self, gpu: int) -> list[GpuInstanceProfile]:
        """Every GPU-instance profile the driver offers, with its possible placements."""

    @abstractmethod
    def gpu_instances(self, gpu: int) -> list[GpuInstance]:
        """Existing GPU instances with their compute instances, by id."""

    @abstractmethod
    def create_gpu_instance(self, gpu: int, profile_id: int, start: int, size: int
                            ) -> GpuInstance: ...

    @abstractmethod
    def create_compute_instance(self, gpu: int, gpu_instance_id: int,
                                slice_count: int | None = None) -> ComputeInstance:
        """A compute instance of ``slice_count`` compute slices (default: the whole GPU
        instance) in the shared-engine profile."""

    @abstractmethod
    def destroy_compute_instance(self, gpu: int, gpu_instance_id: int,
                                 compute_instance_id: int) -> None: ...

    @abstractmethod
    def destroy_gpu_instance(self, gpu: int, gpu_instance_id: int) -> None: ...

    @abstractmethod
    def mig_devices(self, gpu: int) -> list[MigDevice]: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the library (nvmlShutdown); nothing to do for the simulator."""
