"""Does a per-GPU batch fit? A conservative estimate made before anything is launched.

Weights, gradients, SGD momentum and DDP's gradient buckets are four fp32 copies of the
parameters; activations are counted exactly per sample from the model on torch's meta
device; a fixed allowance covers the CUDA context and allocator slack."""

from __future__ import annotations

from dataclasses import dataclass

PARAMETER_COPIES = 4
FP32_BYTES = 4
LOW_PRECISION_BYTES = 2
GPU_CONTEXT_BYTES = 1 << 30  # CUDA context + cuDNN workspace
ALLOCATOR_SLACK = 1.15


@dataclass(frozen=True)
class MemoryEstimate:
    parameters_bytes: int
    activations_per_sample_bytes: float
    fixed_bytes: int
    batch: int

    @property
    def total_bytes(self) -> float:
        dynamic = self.parameters_bytes + self.activations_per_sample_bytes * self.batch
        return dynamic * ALLOCATOR_SLACK + self.fixed_bytes

    def largest_batch(self, available_bytes: float) -> int:
        room = (available_bytes - self.fixed_bytes) / ALLOCATOR_SLACK - self.parameters_bytes
        return max(0, int(room // self.activations_per_sample_bytes))


def estimate_training_memory(
    model: str, image_size: int, batch: int, precision: str, on_gpu: bool
) -> MemoryEstimate:
    from loadgen.train.models import activation_bytes_per_sample, parameter_count

    element = FP32_BYTES if precision == "fp32" else LOW_PRECISION_BYTES
    return MemoryEstimate(
        parameters_bytes=parameter_count(model) * FP32_BYTES * PARAMETER_COPIES,
        activations_per_sample_bytes=activation_bytes_per_sample(model, image_size, element),
        fixed_bytes=GPU_CONTEXT_BYTES if on_gpu else 0,
        batch=batch,
    )
