"""``python -m loadgen <command> ...`` and the ``vgpu-harness`` console script.

Commands are looked up in COMMANDS as "module:function" and imported only when chosen;
each function takes the remaining argv and returns the exit code. Adding a command is one
line in COMMANDS. ``--version`` prints the harness version and its runtime's versions (ONNX
Runtime with its execution providers, LoadGen, NumPy, ONNX, Python) as one JSON object.
"""

from __future__ import annotations

import importlib
import json
import platform
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

COMMANDS: dict[str, str] = {
    "run": "loadgen.cli:run_main",
    "model": "loadgen.cli:model_main",
    "triton-repo": "loadgen.cli:triton_repo_main",
    "train": "loadgen.train.cli:train_main",
    "allreduce": "loadgen.train.cli:allreduce_main",
}


def resolve(command: str) -> Callable[[Sequence[str]], int]:
    module_name, function_name = COMMANDS[command].split(":")
    return getattr(importlib.import_module(module_name), function_name)


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
    return info


def version_info() -> dict[str, Any]:
    from loadgen import HARNESS_VERSION, SCHEMA_VERSION

    return {
        "harness": HARNESS_VERSION,
        "schema_version": SCHEMA_VERSION,
        "python": platform.python_version(),
        "executable": sys.executable,
        "onnxruntime": _onnxruntime_info(),
        "mlcommons-loadgen": _distribution_version("mlcommons-loadgen")[1],
        "numpy": _distribution_version("numpy")[1],
        "onnx": _distribution_version("onnx")[1],
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--version"]:
        print(json.dumps(version_info(), indent=2))
        return 0
    if not args or args[0] not in COMMANDS:
        print(f"usage: vgpu-harness {{{','.join(COMMANDS)}}} ... | --version", file=sys.stderr)
        return 2
    return resolve(args[0])(args[1:])


if __name__ == "__main__":
    sys.exit(main())
