"""The inputs and outputs of a built-in model, from its configuration alone: what
``read_model_io`` reads from the built ONNX file, without building it. Backend torch
uses it, since it never needs the ONNX file."""

from __future__ import annotations

import numpy as np

from loadgen.models import bert, resnet50
from loadgen.models.catalog import PRECISIONS
from loadgen.models.io import ModelIO, TensorInfo

TOKEN_DTYPE = np.dtype(np.int64)


def _resnet50_io(variant: str, precision: str) -> ModelIO:
    cfg = resnet50.VARIANTS[variant]
    dtype = PRECISIONS[precision]
    size = cfg.image_size
    inputs = (TensorInfo(resnet50.INPUT_NAME, dtype, (None, 3, size, size)),)
    outputs = (TensorInfo(resnet50.OUTPUT_NAME, dtype, (None, cfg.num_classes)),)
    return ModelIO(inputs, outputs, {"vgpu.model": "resnet50", "vgpu.variant": variant})


def _bert_io(variant: str, precision: str) -> ModelIO:
    cfg = bert.VARIANTS[variant]
    dtype = PRECISIONS[precision]
    shape = (None, cfg.seq_len)
    inputs = tuple(TensorInfo(name, TOKEN_DTYPE, shape) for name in bert.INPUT_NAMES)
    outputs = tuple(TensorInfo(name, dtype, shape) for name in bert.OUTPUT_NAMES)
    metadata = {"vgpu.model": "bert", "vgpu.variant": variant,
                "vgpu.vocab_size": str(cfg.vocab_size)}
    return ModelIO(inputs, outputs, metadata)


def builtin_model_io(name: str, variant: str, precision: str) -> ModelIO:
    if name == "resnet50":
        return _resnet50_io(variant, precision)
    if name == "bert":
        return _bert_io(variant, precision)
    raise ValueError(f"unknown built-in model {name!r}")
