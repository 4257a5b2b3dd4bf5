"""Build a replica of the GPU acceptance host's Python on a machine without a GPU.

The host's ``python3`` is itself a virtual environment (``/opt/torch/.venv``) holding
PyTorch, numpy, onnx, onnxruntime, pytest, typer, rich, pyyaml, nvidia-ml-py (and pip,
setuptools, wheel, psutil, pytest-timeout), with no package index. The replica is a venv
at ``DEST/opt/torch/.venv`` on this machine's interpreter holding the same distributions
and their dependencies, linked from an existing environment (default: the one running
this script) rather than downloaded; nothing else (no pydantic, paramiko, pyvmomi,
LoadGen: those travel as wheels).

    python scripts/gpu-replica.py DEST [--from SITE_PACKAGES]

Prints the replica's python. Then: ``PYTHON=DEST/opt/torch/.venv/bin/python3 bash
scripts/gpu-check.sh WHEELS`` (docs/gpu-check.md)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

# What the lent GPU machine's python3 brings (its image's package list).
DEVICE_DISTRIBUTIONS = (
    "torch", "numpy", "onnx", "onnxruntime", "pytest", "typer", "rich", "pyyaml",
    "nvidia-ml-py", "pip", "setuptools", "wheel", "psutil", "pytest-timeout",
)
# Not on that machine although a newer typer here requires it: it travels as wheels.
DEVICE_LACKS = ("pydantic",)
DEVICE_VENV = Path("opt/torch/.venv")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(site: Path) -> dict[str, metadata.Distribution]:
    return {canonical(d.metadata["Name"]): d for d in metadata.distributions(path=[str(site)])}


def closure(wanted: tuple[str, ...], available: dict[str, metadata.Distribution]) -> list[str]:
    """``wanted`` and everything they require (no extras), as installed in ``available``."""
    found: list[str] = []
    todo = [canonical(name) for name in wanted]
    while todo:
        name = todo.pop()
        if name in found or name in DEVICE_LACKS:
            continue
        if name not in available:
            raise SystemExit(f"error: {name} is not installed in the source environment")
        found.append(name)
        for line in available[name].requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonical(requirement.name))
    return sorted(found)


def top_level_entries(dist: metadata.Distribution) -> set[str]:
    """The names a distribution put directly into site-packages (packages, modules,
    .pth files, its dist-info), from its RECORD; scripts outside site-packages skipped."""
    entries = set()
    for file in dist.files or []:
        first = Path(file).parts[0]
        if first != ".." and first != "__pycache__":
            entries.add(first)
    return entries


def build(dest: Path, source_site: Path) -> Path:
    venv = dest / DEVICE_VENV
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    target = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" \
        / "site-packages"
    available = installed(source_site)
    for name in closure(DEVICE_DISTRIBUTIONS, available):
        for entry in top_level_entries(available[name]):
            link, origin = target / entry, source_site / entry
            if origin.exists() and not link.exists():
                link.symlink_to(origin)
    return venv / "bin" / "python3"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--from", dest="source", type=Path,
                        default=Path(sysconfig.get_paths()["purelib"]),
                        help="site-packages to link the distributions from")
    args = parser.parse_args(argv)
    print(build(args.dest.resolve(), args.source.resolve()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
