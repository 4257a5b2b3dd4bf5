"""ResNet50 v1.5 for inference: the trainer's ``loadgen.train.models.ResNet`` with each
BatchNorm folded into its convolution, as an exported inference graph has it, and a
softmax head, so its output is the ONNX model's ``probabilities``. The last BatchNorm of
each residual branch starts at the ONNX builder's RESIDUAL_BRANCH_SCALE, which keeps the
activations inside float16 range."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from loadgen.contract import ResNetShape
from loadgen.models.resnet50 import RESIDUAL_BRANCH_SCALE, STAGE_BLOCKS, VARIANTS
from loadgen.train.models import Bottleneck, ResNet

BLOCK_PAIRS = (("conv1", "bn1"), ("conv2", "bn2"), ("conv3", "bn3"))


class ResNetClassifier(nn.Module):
    def __init__(self, net: ResNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.softmax(self.net(images), dim=1),)


def _fold(container: nn.Module, conv: str, bn: str) -> None:
    fused = fuse_conv_bn_eval(getattr(container, conv), getattr(container, bn))
    setattr(container, conv, fused)
    setattr(container, bn, nn.Identity())


@torch.no_grad()
def _scale_residual_branches(net: ResNet) -> None:
    for block in net.modules():
        if isinstance(block, Bottleneck):
            block.bn3.weight.fill_(RESIDUAL_BRANCH_SCALE)
            if block.downsample is not None:
                block.downsample[1].weight.fill_(math.sqrt(0.5))


def fold_batch_norm(net: ResNet) -> ResNet:
    """Fold every BatchNorm of an eval-mode ResNet into the convolution before it."""
    net.eval()
    _fold(net.stem, "0", "1")
    for block in net.modules():
        if isinstance(block, Bottleneck):
            for conv, bn in BLOCK_PAIRS:
                _fold(block, conv, bn)
            if block.downsample is not None:
                _fold(block.downsample, "0", "1")
    return net


def build_resnet50(variant: str) -> ResNetClassifier:
    cfg = VARIANTS[variant]
    net = ResNet(ResNetShape(blocks=STAGE_BLOCKS, base_width=cfg.base_width,
                             num_classes=cfg.num_classes))
    _scale_residual_branches(net)
    return ResNetClassifier(fold_batch_norm(net))
