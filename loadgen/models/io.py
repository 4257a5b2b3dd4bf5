"""Reads a model's input and output names, shapes and dtypes from the ONNX file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: np.dtype
    # None for a dimension without a fixed size (a symbolic or missing dim).
    shape: tuple[int | None, ...]

    @property
    def batched(self) -> bool:
        return bool(self.shape) and self.shape[0] is None

    @property
    def sample_shape(self) -> tuple[int | None, ...]:
        return self.shape[1:] if self.batched else self.shape


@dataclass(frozen=True)
class ModelIO:
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    metadata: dict[str, str]

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.inputs)


def _tensor_info(value: onnx.ValueInfoProto) -> TensorInfo:
    tensor_type = value.type.tensor_type
    dims = tuple(
        d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
        for d in tensor_type.shape.dim
    )
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
    return TensorInfo(value.name, dtype, dims)


def read_model_io(path: str | Path) -> ModelIO:
    """Inputs exclude initializers (older exporters list weights as graph inputs too)."""
    model = onnx.load(str(path), load_external_data=False)
    weights = {init.name for init in model.graph.initializer}
    inputs = tuple(_tensor_info(v) for v in model.graph.input if v.name not in weights)
    outputs = tuple(_tensor_info(v) for v in model.graph.output)
    metadata = {p.key: p.value for p in model.metadata_props}
    return ModelIO(inputs, outputs, metadata)
