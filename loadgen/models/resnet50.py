"""ResNet50 v1.5 as an ONNX inference graph: 7x7 stem, bottleneck stages 3-4-6-3 with the
stride on the 3x3 convolution (v1.5), projection shortcuts, global average pool, FC and
softmax. BatchNorm is folded into the convolutions (weights and bias), as an exported
inference graph would have it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from loadgen.contract import INPUT_NAMES
from loadgen.models.graph import GraphBuilder

STAGE_BLOCKS = (3, 4, 6, 3)
EXPANSION = 4
# The last convolution of each block starts small so that 16 residual additions keep the
# activations well inside float16 range (the "zero-init residual" practice, softened).
RESIDUAL_BRANCH_SCALE = 0.2


@dataclass(frozen=True)
class ResNetConfig:
    base_width: int
    image_size: int
    num_classes: int


VARIANTS = {
    "full": ResNetConfig(base_width=64, image_size=224, num_classes=1000),
    "tiny": ResNetConfig(base_width=8, image_size=32, num_classes=10),
}

(INPUT_NAME,) = INPUT_NAMES["resnet50"]
OUTPUT_NAME = "probabilities"


def _conv(
    g: GraphBuilder, x: str, c_in: int, c_out: int, kernel: int, stride: int, scale: float = 1.0
) -> str:
    fan_in = c_in * kernel * kernel
    w = g.weight("conv_w", (c_out, c_in, kernel, kernel), scale * math.sqrt(2.0 / fan_in))
    b = g.weight("conv_b", (c_out,), 0.01)
    pad = kernel // 2
    return g.op(
        "Conv", x, w, b,
        kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[pad, pad, pad, pad],
    )


def _bottleneck(g: GraphBuilder, x: str, c_in: int, width: int, stride: int) -> str:
    c_out = width * EXPANSION
    y = g.op("Relu", _conv(g, x, c_in, width, 1, 1))
    y = g.op("Relu", _conv(g, y, width, width, 3, stride))
    y = _conv(g, y, width, c_out, 1, 1, scale=RESIDUAL_BRANCH_SCALE)
    shortcut = x
    if stride != 1 or c_in != c_out:
        shortcut = _conv(g, x, c_in, c_out, 1, stride, scale=math.sqrt(0.5))
    return g.op("Relu", g.op("Add", y, shortcut))


def build_resnet50(variant: str, dtype: np.dtype, seed: int) -> onnx.ModelProto:
    cfg = VARIANTS[variant]
    g = GraphBuilder(seed, dtype)
    x = g.op("Relu", _conv(g, INPUT_NAME, 3, cfg.base_width, 7, 2))
    x = g.op("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c_in = cfg.base_width
    for stage, blocks in enumerate(STAGE_BLOCKS):
        width = cfg.base_width * (2**stage)
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            x = _bottleneck(g, x, c_in, width, stride)
            c_in = width * EXPANSION
    x = g.op("Flatten", g.op("GlobalAveragePool", x), axis=1)
    fc_w = g.weight("fc_w", (cfg.num_classes, c_in), math.sqrt(1.0 / c_in))
    fc_b = g.weight("fc_b", (cfg.num_classes,), 0.01)
    logits = g.op("Gemm", x, fc_w, fc_b, transB=1)
    g.op_named("Softmax", [logits], OUTPUT_NAME)
    size = cfg.image_size
    inputs = [helper.make_tensor_value_info(INPUT_NAME, g.onnx_dtype, ["batch", 3, size, size])]
    outputs = [
        helper.make_tensor_value_info(OUTPUT_NAME, g.onnx_dtype, ["batch", cfg.num_classes])
    ]
    return g.model(
        f"resnet50_{variant}", inputs, outputs,
        {"vgpu.model": "resnet50", "vgpu.variant": variant},
    )
