"""Does a per-GPU batch fit? A conservative estimate made before anything is launched.

Weights, gradients, SGD momentum and DDP's gradient buckets are four fp32 copies of the
parameters; activations are what autograd keeps per sample: the output of every layer of
the contract's ResNet shape except the in-place ReLUs. Both are counted from the shape
alone (no torch here); tests check them against the harness's model on torch's meta
device. A fixed allowance covers the CUDA context and allocator slack."""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.contract import BOTTLENECK_EXPANSION, TRAINING_SHAPES, ResNetShape

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


def _conv_size(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def _bottleneck(in_channels: int, width: int, stride: int, size: int) -> tuple[int, int, int]:
    """(parameters, activation elements, output size) of one bottleneck block."""
    out_channels = width * BOTTLENECK_EXPANSION
    out_size = _conv_size(size, 3, stride, 1)
    params = in_channels * width + 9 * width * width + width * out_channels
    params += 2 * (width + width + out_channels)  # batch-norm weight and bias
    elements = 2 * width * size**2 + 2 * width * out_size**2 + 2 * out_channels * out_size**2
    if stride != 1 or in_channels != out_channels:
        params += in_channels * out_channels + 2 * out_channels
        elements += 2 * out_channels * out_size**2
    return params, elements, out_size


def resnet_counts(shape: ResNetShape, image_size: int) -> tuple[int, int]:
    """(parameters, activation elements per sample) of the ResNet ``shape`` at
    ``image_size``: stem convolution, batch norm and max pool, the bottleneck stages,
    global average pool and the classifier."""
    width = shape.base_width
    params = 3 * width * 49 + 2 * width
    size = _conv_size(image_size, 7, 2, 3)
    elements = 2 * width * size**2
    size = _conv_size(size, 3, 2, 1)
    elements += width * size**2
    channels = width
    for index, blocks in enumerate(shape.blocks):
        stage_width = width * 2**index
        for block in range(blocks):
            stride = 2 if index > 0 and block == 0 else 1
            block_params, block_elements, size = _bottleneck(channels, stage_width, stride,
                                                             size)
            params += block_params
            elements += block_elements
            channels = stage_width * BOTTLENECK_EXPANSION
    params += channels * shape.num_classes + shape.num_classes
    elements += channels + shape.num_classes
    return params, elements


def estimate_training_memory(
    model: str, image_size: int, batch: int, precision: str, on_gpu: bool
) -> MemoryEstimate:
    element = FP32_BYTES if precision == "fp32" else LOW_PRECISION_BYTES
    parameters, activations = resnet_counts(TRAINING_SHAPES[model], image_size)
    return MemoryEstimate(
        parameters_bytes=parameters * FP32_BYTES * PARAMETER_COPIES,
        activations_per_sample_bytes=float(activations * element),
        fixed_bytes=GPU_CONTEXT_BYTES if on_gpu else 0,
        batch=batch,
    )
