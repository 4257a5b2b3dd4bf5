"""The harness image: its build settings and its build context.

The Dockerfile and its pinned requirements ship as package data in ``harness_image/``
beside this module (``Dockerfile``, ``harness-requirements.txt``); the context is a folder
holding them next to a copy of the ``loadgen`` package.
"""

from __future__ import annotations

import functools
import hashlib
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import loadgen
from vgpu.defaults import DEFAULT_BASE_IMAGE

DEFAULT_ORT_PACKAGE = "onnxruntime-gpu"
ORT_PACKAGES = ("onnxruntime-gpu", "onnxruntime")
DOCKERFILE = "Dockerfile"
REQUIREMENTS = "harness-requirements.txt"
PIP_CA = "pip-ca.pem"
IMAGE_FILES = (DOCKERFILE, REQUIREMENTS)  # in harness_image/, copied into the context
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".*")


@dataclass(frozen=True)
class NgcBase:
    """The NGC PyTorch release a guest driver branch runs natively: its CUDA is the newest
    the branch supports without the CUDA forward-compatibility package, which a vGPU guest
    cannot count on. ``min_driver`` is NVIDIA's minimum Linux driver for that CUDA update
    (CUDA release notes, table 3)."""

    branch: int
    cuda: str
    image: str
    min_driver: str


# Known-good pairs (NVIDIA's CUDA toolkit/driver table and the NGC PyTorch release notes).
NGC_BASES: tuple[NgcBase, ...] = (
    NgcBase(535, "12.2", "nvcr.io/nvidia/pytorch:23.10-py3", "535.104.05"),
    NgcBase(550, "12.4", "nvcr.io/nvidia/pytorch:24.05-py3", "550.54.15"),
    NgcBase(570, "12.8", "nvcr.io/nvidia/pytorch:25.03-py3", "570.124.06"),
)
_DRIVER_VERSION = re.compile(r"^(\d{3,4})\.\d+(?:\.\d+)?$")


class UnknownDriverBranch(ValueError):
    """A guest driver version whose branch has no known NGC base (or is no version)."""


def driver_branch(version: str) -> int:
    """``535.161.08`` -> 535."""
    match = _DRIVER_VERSION.match(version.strip())
    if match is None:
        raise UnknownDriverBranch(f"'{version}' is not an NVIDIA driver version (like "
                                  "550.127.05)")
    return int(match.group(1))


def ngc_base_for_driver(version: str) -> NgcBase:
    """The NGC base the harness image is built FROM for a guest driver ``version``."""
    branch = driver_branch(version)
    for base in NGC_BASES:
        if base.branch == branch:
            return base
    known = ", ".join(f"R{b.branch} -> CUDA {b.cuda} ({b.image})" for b in NGC_BASES)
    raise UnknownDriverBranch(f"guest driver {version} is branch R{branch}, for which vgpu "
                              f"knows no NGC base image (known: {known})")


def ngc_base_for_cuda(cuda: str) -> NgcBase | None:
    """The known NGC base of a CUDA release (``12.8`` or ``12.8.93``: major.minor count)."""
    wanted = ".".join(cuda.strip().split(".")[:2])
    return next((b for b in NGC_BASES if b.cuda == wanted), None)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("-", 1)[0]))


def driver_at_least(version: str, minimum: str) -> bool:
    """Whether NVIDIA driver ``version`` is ``minimum`` or newer (550.54.15 < 550.127.05)."""
    return _version_key(version) >= _version_key(minimum)


@dataclass(frozen=True)
class HeldImage:
    """A harness image held fixed by its content: what docker reports as its ID
    (``sha256:...``) on the guests, and the reference it was made under, for output."""

    reference: str
    image_id: str


@dataclass(frozen=True)
class HarnessBase:
    image: str
    why: str  # for output: where the choice came from


def harness_base(explicit: str | None, guest_driver: str | None) -> HarnessBase:
    """The image a guest's harness image is built FROM: ``explicit`` (the scenario's
    guest.base_image) if given, else the NGC base of the guest driver's branch (raises
    UnknownDriverBranch), else the default."""
    if explicit:
        return HarnessBase(explicit, "guest.base_image")
    if guest_driver is None:
        return HarnessBase(DEFAULT_BASE_IMAGE, "default: the guest driver version is not "
                           "known (inventory drivers.guest_driver_version)")
    base = ngc_base_for_driver(guest_driver)
    return HarnessBase(base.image, f"guest driver {guest_driver}: R{base.branch}, CUDA "
                       f"{base.cuda}")


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
    if name not in IMAGE_FILES:
        raise KeyError(name)
    return resources.files("vgpu.container").joinpath("harness_image", name).read_text("utf-8")


def loadgen_source() -> Path:
    """The folder of the ``loadgen`` package this vgpu runs with."""
    return Path(loadgen.__file__).resolve().parent


@functools.cache
def harness_digest() -> str:
    """A digest of what the harness image is built from (the Dockerfile, the pinned
    requirements, loadgen's sources): an image labelled with another one holds an older
    or newer harness of the same version, and is built again."""
    digest = hashlib.sha256()
    for name in sorted(IMAGE_FILES):
        digest.update(name.encode() + b"\0" + data_file_text(name).encode() + b"\0")
    root = loadgen_source()
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and "__pycache__" not in relative.parts \
                and not path.name.startswith(".") and path.suffix not in (".pyc", ".pyo"):
            digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def write_build_context(dest: Path, pip_ca_bundle: Path | None = None) -> Path:
    """Fill ``dest`` (created if missing, must hold no loadgen/ yet) with the Dockerfile,
    the requirements, loadgen/ and pip-ca.pem: a copy of ``pip_ca_bundle`` (PEM; pip then
    trusts only it, so give a full bundle, e.g. the host's /etc/ssl/certs one) or empty.
    Returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in IMAGE_FILES:
        (dest / name).write_text(data_file_text(name), encoding="utf-8")
    ca = pip_ca_bundle.read_bytes() if pip_ca_bundle else b""
    (dest / PIP_CA).write_bytes(ca)
    shutil.copytree(loadgen_source(), dest / "loadgen", ignore=_IGNORE)
    return dest
