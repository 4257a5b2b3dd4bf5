"""The built-in models as PyTorch modules for backend torch, with seeded random weights:
ResNet50 (the trainer's definition with BatchNorm folded and a softmax head) and BERT
(the layers, inputs, outputs and variants of the ONNX graph in loadgen.models.bert).

Each module takes its inputs positionally in the contract's input order and returns a
tuple of outputs in the ONNX model's output order. Importing this package imports torch."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from loadgen.torchmodels.bert import build_bert
from loadgen.torchmodels.decoder import build_decoder
from loadgen.torchmodels.resnet import build_resnet50

BUILDERS: dict[str, Callable[[str], nn.Module]] = {
    "resnet50": build_resnet50,
    "bert": build_bert,
    "llm": build_decoder,
}

__all__ = ["BUILDERS", "build_torch_model"]


def build_torch_model(name: str, variant: str, seed: int) -> nn.Module:
    """An fp32 model on the CPU in eval mode; the same seed gives the same weights. The
    global RNG is left as it was."""
    if name not in BUILDERS:
        raise ValueError(f"unknown model {name!r}; built-in models: {sorted(BUILDERS)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BUILDERS[name](variant)
    return model.eval()
