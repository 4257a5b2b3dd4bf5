"""Models without downloads: ResNet50 v1.5 and BERT built as ONNX graphs with seeded random
weights and cached on disk; a user's own ONNX file goes through the same I/O reader."""

from __future__ import annotations

from loadgen.models.builtin_io import builtin_model_io
from loadgen.models.cache import build_model, cache_key, default_cache_dir
from loadgen.models.catalog import DEFAULT_VARIANT, INPUT_NAMES, PRECISIONS, VARIANTS, is_builtin
from loadgen.models.io import ModelIO, TensorInfo, read_model_io

__all__ = [
    "DEFAULT_VARIANT",
    "INPUT_NAMES",
    "PRECISIONS",
    "VARIANTS",
    "ModelIO",
    "TensorInfo",
    "build_model",
    "builtin_model_io",
    "cache_key",
    "default_cache_dir",
    "is_builtin",
    "read_model_io",
]
