"""What a guest should end up with: the desired state the steps compare facts against."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import loadgen
from vgpu.container.docker import DOCKER, DockerCli
from vgpu.container.images import DEFAULT_BASE_IMAGE, HeldImage, default_tag

DriverKind = Literal["vgpu-guest", "datacenter"]
# gridd.conf FeatureType, as the driver's gridd.conf.template numbers them.
VGPU_FEATURE_TYPE = 1  # NVIDIA vGPU: the licence edition follows the VM's vGPU type
COMPUTE_SERVER_FEATURE_TYPE = 4  # NVIDIA Virtual Compute Server: GPUs passed through
DRIVER_VERSION_IN_NAME = re.compile(r"(\d{3,}\.\d+(?:\.\d+)?)")


def driver_version_from_name(source: str) -> str | None:
    """``NVIDIA-Linux-x86_64-535.154.05-grid.run`` -> ``535.154.05``."""
    match = DRIVER_VERSION_IN_NAME.search(source.rsplit("/", 1)[-1])
    return match.group(1) if match else None


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


@dataclass(frozen=True)
class ToolkitRepo:
    """The NVIDIA container toolkit apt repository (a lab may point these at a mirror)."""

    list_line: str = (
        "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
        "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /"
    )
    gpg_key_url: str = "https://nvidia.github.io/libnvidia-container/gpgkey"
    keyring: str = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
    list_file: str = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"


@dataclass(frozen=True)
class HarnessSpec:
    """The node harness (the ``loadgen`` package) to install in a venv on the guest."""

    source_dir: Path
    version: str
    requirements: tuple[str, ...] = ()
    python: str = "python3"
    # Extra directories put on the harness venv's path with a .pth file: for a lab whose
    # guests share a filesystem with a prepared environment (no package index needed).
    extra_site_dirs: tuple[str, ...] = ()
    pip_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class HarnessImageSpec:
    """The harness image a container guest gets: built on the guest FROM ``base_image``
    with ``ort_package`` for guest driver branch ``driver_branch`` (labelled with it; None:
    not known), or, where ``pull`` names a registry image, pulled and tagged. ``held``: an
    image that must already be on the guest and is used as it is, by its ID (a
    revalidation runs its baseline's image; nothing is built or pulled)."""

    base_image: str = DEFAULT_BASE_IMAGE
    pull: str | None = None
    ort_package: str = "onnxruntime"
    tag: str = field(default_factory=default_tag)
    version: str = loadgen.HARNESS_VERSION
    driver_branch: int | None = None
    held: HeldImage | None = None


@dataclass(frozen=True)
class MeshPeer:
    name: str
    address: str
    port: int
    user: str
    host_key_lines: tuple[str, ...]  # known_hosts lines for this peer


@dataclass(frozen=True)
class MeshSpec:
    """Password-less SSH between the VMs of one scenario, with one key per scenario."""

    scenario: str
    private_key: str  # OpenSSH PEM text (never logged)
    public_key: str  # "ssh-ed25519 AAAA... comment"
    peers: tuple[MeshPeer, ...]


@dataclass(frozen=True)
class GuestRequirements:
    steps: tuple[str, ...]
    base_packages: tuple[str, ...] = ("build-essential", "cmake", "curl")
    container_runtime: str = "docker"  # docker | apptainer | none
    docker_package: str = "docker.io"
    apptainer_package: str = "apptainer"
    driver_kind: DriverKind = "vgpu-guest"
    driver_source: str | None = None  # local .run file or URL
    driver_version: str | None = None  # from the file name when unset
    # The host driver VIB the guest's vGPU Manager runs (drivers.host_driver_version), and
    # the guest branches the inventory declares it runs beyond NVIDIA's table.
    host_driver_version: str | None = None
    compatible_guest_branches: tuple[int, ...] = ()
    # The ESXi host vCenter reports the VM on, when host_driver_version is that host's VIB
    # as vCenter reports it; None: the inventory's drivers.host_driver_version.
    host_name: str | None = None
    toolkit_repo: ToolkitRepo = field(default_factory=ToolkitRepo)
    feature_type: int = VGPU_FEATURE_TYPE
    licence_token_file: Path | None = None
    licence_timeout_s: float = 120.0
    reboot_timeout_s: float = 900.0  # a reboot (e.g. to unload nouveau) must be back by then
    expected_vgpu_types: tuple[str, ...] = ()  # e.g. ("A100D-1-10C",)
    expected_mig_profiles: tuple[str, ...] = ()  # e.g. ("1g.10gb",)
    harness: HarnessSpec | None = None
    image: HarnessImageSpec | None = None
    docker: DockerCli = DOCKER
    mesh: MeshSpec | None = None

    @property
    def expected_driver_version(self) -> str | None:
        if self.driver_version:
            return self.driver_version
        return driver_version_from_name(self.driver_source) if self.driver_source else None
