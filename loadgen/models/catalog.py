"""The built-in models: builders and precisions; names, variants and input names are the
contract's (loadgen.contract)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from loadgen.contract import (
    DEFAULT_VARIANT,
    INFERENCE_MODELS,
    INFERENCE_PRECISIONS,
    INFERENCE_VARIANTS,
    INPUT_NAMES,
    is_builtin_model,
)
from loadgen.models import bert, decoder, resnet50

# Bump when a builder's graph or weights change: it is part of every cache key.
BUILDER_VERSION = 1
WEIGHT_SEED = 20240501

PRECISIONS: dict[str, np.dtype] = {
    name: np.dtype(f"float{name.removeprefix('fp')}") for name in INFERENCE_PRECISIONS
}

Builder = Callable[[str, np.dtype, int], onnx.ModelProto]

BUILDERS: dict[str, Builder] = {
    "resnet50": resnet50.build_resnet50,
    "bert": bert.build_bert,
    "llm": decoder.build_decoder,
}
VARIANTS = INFERENCE_VARIANTS
is_builtin = is_builtin_model

__all__ = ["BUILDERS", "DEFAULT_VARIANT", "INFERENCE_MODELS", "INPUT_NAMES", "PRECISIONS",
           "VARIANTS", "is_builtin"]
