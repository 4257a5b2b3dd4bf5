"""Writes a Triton model repository for an ONNX model.

Two kinds:
- ``onnxruntime``: Triton's onnxruntime backend (platform onnxruntime_onnx) on KIND_GPU
  with dynamic batching: what a GPU lab serves.
- ``python``: Triton's python backend running onnxruntime inside (1/model.py next to
  1/model.onnx) on KIND_CPU with ``dynamic_batching {}``: for machines without the
  onnxruntime backend, such as the pytriton wheel's server.

``device`` overrides the instance group's kind (``gpu``: KIND_GPU, ``cpu``: KIND_CPU), e.g.
the onnxruntime backend on a machine without a GPU.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from loadgen.models import TensorInfo, read_model_io

KINDS = ("python", "onnxruntime")
DEVICES = ("gpu", "cpu")
DEFAULT_DEVICE = {"python": "cpu", "onnxruntime": "gpu"}
PYTHON_MODEL_SOURCE = Path(__file__).with_name("triton_python_model.py")
TRITON_TYPES = {
    np.dtype(np.float32): "TYPE_FP32",
    np.dtype(np.float16): "TYPE_FP16",
    np.dtype(np.float64): "TYPE_FP64",
    np.dtype(np.int64): "TYPE_INT64",
    np.dtype(np.int32): "TYPE_INT32",
    np.dtype(np.int8): "TYPE_INT8",
    np.dtype(np.uint8): "TYPE_UINT8",
    np.dtype(np.bool_): "TYPE_BOOL",
}


class RepositoryError(ValueError):
    """The model cannot be described in a Triton configuration."""


def _tensor_block(tensors: tuple[TensorInfo, ...], batched: bool) -> str:
    entries = []
    for t in tensors:
        if t.dtype not in TRITON_TYPES:
            raise RepositoryError(f"tensor {t.name!r} has dtype {t.dtype}, which this writer "
                                  f"does not map to a Triton type")
        dims = t.sample_shape if batched else t.shape
        dims_text = ", ".join("-1" if d is None else str(d) for d in dims)
        entries.append(f'  {{\n    name: "{t.name}"\n    data_type: {TRITON_TYPES[t.dtype]}\n'
                       f"    dims: [ {dims_text} ]\n  }}")
    return ",\n".join(entries)


def model_config(
    model_path: Path, model_name: str, kind: str, max_batch_size: int, instances: int,
    intra_op_threads: int | None = None, device: str | None = None,
) -> str:
    if kind not in KINDS:
        raise RepositoryError(f"kind {kind!r} is not one of {KINDS}")
    if device is not None and device not in DEVICES:
        raise RepositoryError(f"device {device!r} is not one of {DEVICES}")
    io = read_model_io(model_path)
    batched = all(t.batched for t in io.inputs) and all(t.batched for t in io.outputs)
    lines = [f'name: "{model_name}"']
    if kind == "python":
        lines.append('backend: "python"')
    else:
        lines.append('platform: "onnxruntime_onnx"')
    lines.append(f"max_batch_size: {max_batch_size if batched else 0}")
    lines.append(f"input [\n{_tensor_block(io.inputs, batched)}\n]")
    lines.append(f"output [\n{_tensor_block(io.outputs, batched)}\n]")
    group = f"KIND_{(device or DEFAULT_DEVICE[kind]).upper()}"
    lines.append(f"instance_group [\n  {{\n    kind: {group}\n    count: {instances}\n  }}\n]")
    if batched:
        lines.append("dynamic_batching { }" if kind == "python"
                     else "dynamic_batching {\n  max_queue_delay_microseconds: 100\n}")
    if kind == "python" and intra_op_threads:
        lines.append('parameters: {\n  key: "intra_op_threads"\n  value: { string_value: '
                     f'"{intra_op_threads}" }}\n}}')
    return "\n".join(lines) + "\n"


def write_repository(
    repository: str | Path,
    model_path: str | Path,
    model_name: str,
    kind: str = "python",
    max_batch_size: int = 64,
    instances: int = 1,
    intra_op_threads: int | None = None,
    device: str | None = None,
) -> Path:
    """Write ``repository/model_name/{config.pbtxt,1/model.onnx[,1/model.py]}``; returns
    the model's folder. An existing model folder of that name is replaced."""
    if max_batch_size < 1 or instances < 1:
        raise RepositoryError("max_batch_size and instances must be >= 1")
    config = model_config(Path(model_path), model_name, kind, max_batch_size, instances,
                          intra_op_threads, device)
    model_dir = Path(repository) / model_name
    if model_dir.exists():
        shutil.rmtree(model_dir)
    version_dir = model_dir / "1"
    version_dir.mkdir(parents=True)
    shutil.copyfile(model_path, version_dir / "model.onnx")
    if kind == "python":
        shutil.copyfile(PYTHON_MODEL_SOURCE, version_dir / "model.py")
    (model_dir / "config.pbtxt").write_text(config)
    return model_dir
