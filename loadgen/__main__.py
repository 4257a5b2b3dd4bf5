"""``python -m loadgen <command> ...`` and the ``vgpu-harness`` console script.

Commands are looked up in COMMANDS as "module:function" and imported only when chosen;
each function takes the remaining argv and returns the exit code. Adding a command is one
line in COMMANDS. ``--version`` prints the harness version and its runtime's versions (ONNX
Runtime with its execution providers, LoadGen, NumPy, ONNX, Python) as one JSON object.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Sequence

COMMANDS: dict[str, str] = {
    "run": "loadgen.cli:run_main",
    "model": "loadgen.cli:model_main",
    "triton-repo": "loadgen.cli:triton_repo_main",
    "train": "loadgen.train.cli:train_main",
    "allreduce": "loadgen.train.cli:allreduce_main",
    "mpiprobe": "loadgen.train.cli:mpi_probe_main",
}


def resolve(command: str) -> Callable[[Sequence[str]], int]:
    module_name, function_name = COMMANDS[command].split(":")
    return getattr(importlib.import_module(module_name), function_name)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--version"]:
        from loadgen.versions import version_info

        print(json.dumps(version_info(), indent=2))
        return 0
    if not args or args[0] not in COMMANDS:
        print(f"usage: vgpu-harness {{{','.join(COMMANDS)}}} ... | --version", file=sys.stderr)
        return 2
    return resolve(args[0])(args[1:])


if __name__ == "__main__":
    sys.exit(main())
