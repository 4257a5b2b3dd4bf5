"""What the harness runs with: its own version and its runtime's (ONNX Runtime package,
version and execution providers, LoadGen, NumPy, ONNX, Python). Printed by
``python -m loadgen --version`` and written into every result record, so a stored result
says which runtime measured it (the GPU build or the CPU one)."""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from typing import Any

# TensorRT's Python package under each of its PyPI names, newest CUDA first; the -libs
# ones alone are what onnxruntime-gpu's TensorRT provider loads.
TENSORRT_DISTRIBUTIONS = ("tensorrt", "tensorrt-cu13", "tensorrt-cu12", "tensorrt-cu11",
                          "tensorrt-cu13-libs", "tensorrt-cu12-libs")


def _distribution_version(*names: str) -> tuple[str | None, str | None]:
    """(name, version) of the first of ``names`` that is installed, else (None, None)."""
    for name in names:
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None, None


def _onnxruntime_info() -> dict[str, Any]:
    package, version = _distribution_version("onnxruntime-gpu", "onnxruntime")
    info: dict[str, Any] = {"package": package, "version": version, "providers": [],
                            "device": None}
    try:
        import onnxruntime as ort
    except ImportError as exc:
        info["error"] = str(exc)
        return info
    info["version"] = ort.__version__
    info["providers"] = list(ort.get_available_providers())
    info["device"] = ort.get_device()
    info.update(_onnxruntime_build())
    return info


def _onnxruntime_build() -> dict[str, str | None]:
    """The CUDA and cuDNN an onnxruntime-gpu wheel was built against (a CPU wheel names
    none), and the TensorRT Python package beside it, if any."""
    try:
        from onnxruntime.capi import build_and_package_info as build
    except ImportError:
        build = None
    return {
        "cuda_version": getattr(build, "cuda_version", None) or None,
        "cudnn_version": getattr(build, "cudnn_version", None) or None,
        "tensorrt_version": _distribution_version(*TENSORRT_DISTRIBUTIONS)[1],
    }


def _torch_info() -> dict[str, Any] | None:
    """PyTorch's CUDA and cuDNN, when a backend of this process loaded torch (importing it
    only to report would cost seconds on every run)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"version": torch.__version__, "cuda": torch.version.cuda, "cudnn": cudnn}


def operating_system() -> str:
    """The distribution and kernel, e.g. 'Ubuntu 22.04.4 LTS (Linux 5.15.0-105-generic)'."""
    try:
        name = platform.freedesktop_os_release().get("PRETTY_NAME")
    except OSError:
        name = None
    kernel = f"{platform.system()} {platform.release()}"
    return f"{name} ({kernel})" if name else kernel


def version_info() -> dict[str, Any]:
    from loadgen import HARNESS_VERSION, SCHEMA_VERSION

    return {
        "harness": HARNESS_VERSION,
        "schema_version": SCHEMA_VERSION,
        "python": platform.python_version(),
        "os": operating_system(),
        "executable": sys.executable,
        "onnxruntime": _onnxruntime_info(),
        "mlcommons-loadgen": _distribution_version("mlcommons-loadgen")[1],
        "numpy": _distribution_version("numpy")[1],
        "onnx": _distribution_version("onnx")[1],
        "torch": _torch_info(),
    }
