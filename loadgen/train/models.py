"""ResNet definitions for synthetic-data training (no torchvision on the nodes); the
models and their shapes are the contract's (loadgen.contract).

ResNet50 follows torchvision's v1.5 layout (stride on the 3x3 convolution of each
bottleneck, blocks 3-4-6-3), so its parameter count matches the reference 25,557,032.
"""

from __future__ import annotations

import torch
from torch import nn

from loadgen.contract import BOTTLENECK_EXPANSION, TRAINING_SHAPES, ResNetShape

RESNET_SHAPES = TRAINING_SHAPES


class Bottleneck(nn.Module):
    expansion = BOTTLENECK_EXPANSION

    def __init__(self, in_channels: int, width: int, stride: int) -> None:
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        result: torch.Tensor = self.relu(out + identity)
        return result


class ResNet(nn.Module):
    def __init__(self, shape: ResNetShape) -> None:
        super().__init__()
        width = shape.base_width
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages: list[nn.Module] = []
        in_channels = width
        for index, count in enumerate(shape.blocks):
            stage_width = width * 2**index
            stride = 1 if index == 0 else 2
            blocks: list[nn.Module] = []
            for block_index in range(count):
                block_stride = stride if block_index == 0 else 1
                blocks.append(Bottleneck(in_channels, stage_width, block_stride))
                in_channels = stage_width * Bottleneck.expansion
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, shape.num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        logits: torch.Tensor = self.fc(torch.flatten(self.pool(x), 1))
        return logits


def build_model(name: str) -> ResNet:
    """A freshly initialised model; seed torch before calling for identical weights."""
    return ResNet(RESNET_SHAPES[name])


def num_classes(name: str) -> int:
    return RESNET_SHAPES[name].num_classes

