"""The built-in models: names, variants, precisions and what their inputs are called."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from loadgen.models import bert, resnet50

# Bump when a builder's graph or weights change: it is part of every cache key.
BUILDER_VERSION = 1
WEIGHT_SEED = 20240501

PRECISIONS = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16)}

Builder = Callable[[str, np.dtype, int], onnx.ModelProto]

BUILDERS: dict[str, Builder] = {
    "resnet50": resnet50.build_resnet50,
    "bert": bert.build_bert,
}
VARIANTS: dict[str, tuple[str, ...]] = {
    "resnet50": tuple(resnet50.VARIANTS),
    "bert": tuple(bert.VARIANTS),
}
DEFAULT_VARIANT = {"resnet50": "full", "bert": "large"}
INPUT_NAMES: dict[str, tuple[str, ...]] = {
    "resnet50": (resnet50.INPUT_NAME,),
    "bert": bert.INPUT_NAMES,
}


def is_builtin(name: str) -> bool:
    return name in BUILDERS
