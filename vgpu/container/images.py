"""The harness image: its build settings and its build context.

The Dockerfile and its pinned requirements ship as vgpu package data
(``vgpu/data/harness.Dockerfile``, ``vgpu/data/harness-requirements.txt``); the context is
a folder holding them next to a copy of the ``loadgen`` package.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import loadgen

DEFAULT_BASE_IMAGE = "nvcr.io/nvidia/pytorch:24.10-py3"
DEFAULT_ORT_PACKAGE = "onnxruntime-gpu"
ORT_PACKAGES = ("onnxruntime-gpu", "onnxruntime")
DOCKERFILE = "Dockerfile"
REQUIREMENTS = "harness-requirements.txt"
PIP_CA = "pip-ca.pem"
_DATA_FILES = {DOCKERFILE: "harness.Dockerfile", REQUIREMENTS: REQUIREMENTS}
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".*")


def default_tag() -> str:
    return f"vgpu-harness:{loadgen.HARNESS_VERSION}"


@dataclass(frozen=True)
class ImageBuild:
    """``docker build`` settings. ``ort_version`` None keeps the Dockerfile's pin;
    ``network`` "host" lets pip reach the package index where the bridge has no route;
    ``pip_index_url`` points pip at a mirror."""

    tag: str = field(default_factory=default_tag)
    base_image: str = DEFAULT_BASE_IMAGE
    ort_package: str = DEFAULT_ORT_PACKAGE
    ort_version: str | None = None
    network: str | None = None
    pip_index_url: str | None = None
    pull: bool = False
    no_cache: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.ort_package not in ORT_PACKAGES:
            raise ValueError(f"ort_package must be one of {', '.join(ORT_PACKAGES)}, "
                             f"got {self.ort_package!r}")

    def build_args(self) -> dict[str, str]:
        args = {"BASE_IMAGE": self.base_image, "ORT_PACKAGE": self.ort_package,
                "HARNESS_VERSION": loadgen.HARNESS_VERSION}
        if self.ort_version:
            args["ORT_VERSION"] = self.ort_version
        if self.pip_index_url:
            args["PIP_INDEX_URL"] = self.pip_index_url
        return args


def data_file_text(name: str) -> str:
    """The text of a context file (DOCKERFILE or REQUIREMENTS) as shipped with vgpu."""
    return resources.files("vgpu").joinpath("data", _DATA_FILES[name]).read_text("utf-8")


def loadgen_source() -> Path:
    """The folder of the ``loadgen`` package this vgpu runs with."""
    return Path(loadgen.__file__).resolve().parent


def write_build_context(dest: Path, pip_ca_bundle: Path | None = None) -> Path:
    """Fill ``dest`` (created if missing, must hold no loadgen/ yet) with the Dockerfile,
    the requirements, loadgen/ and pip-ca.pem: a copy of ``pip_ca_bundle`` (PEM; pip then
    trusts only it, so give a full bundle, e.g. the host's /etc/ssl/certs one) or empty.
    Returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in _DATA_FILES:
        (dest / name).write_text(data_file_text(name), encoding="utf-8")
    ca = pip_ca_bundle.read_bytes() if pip_ca_bundle else b""
    (dest / PIP_CA).write_bytes(ca)
    shutil.copytree(loadgen_source(), dest / "loadgen", ignore=_IGNORE)
    return dest
