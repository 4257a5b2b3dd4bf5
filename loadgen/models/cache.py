"""Builds a built-in model once and keeps it on disk, keyed by a content hash."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import onnx

from loadgen.models.catalog import BUILDER_VERSION, BUILDERS, PRECISIONS, VARIANTS, WEIGHT_SEED

CACHE_ENV = "VGPU_HARNESS_CACHE"


def default_cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "vgpu-harness" / "models"


def cache_key(name: str, variant: str, precision: str) -> str:
    identity = {
        "name": name, "variant": variant, "precision": precision,
        "builder_version": BUILDER_VERSION, "seed": WEIGHT_SEED,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def build_model(
    name: str, variant: str, precision: str, cache_dir: str | Path | None = None
) -> Path:
    """Return the path of the ONNX file for a built-in model, building it on first use."""
    if name not in BUILDERS:
        raise ValueError(f"unknown model {name!r}; built-in models: {sorted(BUILDERS)}")
    if variant not in VARIANTS[name]:
        raise ValueError(f"unknown {name} variant {variant!r}; one of {VARIANTS[name]}")
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; one of {sorted(PRECISIONS)}")
    directory = Path(cache_dir) if cache_dir else default_cache_dir()
    key = cache_key(name, variant, precision)[:16]
    path = directory / f"{name}-{variant}-{precision}-{key}.onnx"
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    model = BUILDERS[name](variant, PRECISIONS[precision], WEIGHT_SEED)
    # Several harness instances on one host may build at once: each writes its own
    # temporary file and the rename is atomic, so readers never see a partial model.
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    onnx.save_model(model, str(tmp))
    os.replace(tmp, path)
    return path
