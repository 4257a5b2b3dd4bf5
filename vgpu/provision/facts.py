"""Facts: each binds the command that reads something on a host to the parser of its
output. Pure, so they are tested on captured text; the steps decide what to change by
comparing these with the requirements."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Fact(Generic[T]):
    """A command and the one parser of what it prints (pyinfra's shape)."""

    command: str
    parse: Callable[[str], T]

    def process(self, output: str) -> T:
        return self.parse(output)


FIELD_SEP = "|"
_OS_FACTS_COMMAND = (
    '. /etc/os-release 2>/dev/null; printf "%s|%s|%s|%s|%s|%s|%s|%s|%s\\n" "${ID:-unknown}" '
    '"${VERSION_ID:-}" "$(uname -r)" "$(nproc)" '
    "\"$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)\" "
    '"$(command -v apt-get || command -v dnf || command -v yum || true)" "$HOME" '
    '"${VGPU_SYSTEM_ROOT:-/}" "$(dpkg --print-architecture 2>/dev/null || uname -m)"'
)


@dataclass(frozen=True)
class OsFacts:
    distro: str
    version: str
    kernel: str
    cpus: int
    memory_kib: int
    package_manager: str  # apt | dnf | yum | ""
    home: str
    system_root: str
    arch: str  # dpkg's name (amd64, arm64) where dpkg exists, else uname -m

    @property
    def memory_gib(self) -> float:
        return self.memory_kib / 1024 / 1024

    def summary(self) -> str:
        return (f"{self.distro} {self.version}, kernel {self.kernel}, {self.cpus} CPUs, "
                f"{self.memory_gib:.1f} GiB, {self.package_manager or 'no package manager'}")


def parse_os_facts(text: str) -> OsFacts:
    parts = text.strip().splitlines()[-1].split(FIELD_SEP)
    if len(parts) != 9:
        raise ValueError(f"unexpected OS facts output: {text.strip()!r}")
    distro, version, kernel, cpus, mem, manager, home, root, arch = parts
    return OsFacts(distro=distro, version=version, kernel=kernel, cpus=int(cpus or 0),
                   memory_kib=int(mem or 0), package_manager=manager.rsplit("/", 1)[-1],
                   home=home, system_root=root or "/", arch=arch)


OS_FACTS = Fact(_OS_FACTS_COMMAND, parse_os_facts)


def parse_dpkg_installed(text: str) -> set[str]:
    """Names from ``dpkg-query -W -f='${Package}\\t${Status}\\n'`` that are installed."""
    installed = set()
    for line in text.splitlines():
        name, _, status = line.partition("\t")
        if status.strip() == "install ok installed":
            installed.add(name.split(":")[0].strip())
    return installed


def parse_rpm_installed(text: str, wanted: tuple[str, ...]) -> set[str]:
    """``rpm -q a b`` prints 'package X is not installed' for missing ones."""
    missing = {m.group(1) for m in re.finditer(r"package (\S+) is not installed", text)}
    return {name for name in wanted if name not in missing}


def dpkg_installed(packages: tuple[str, ...]) -> Fact[set[str]]:
    """Which of ``packages`` dpkg has installed (Debian family)."""
    names = " ".join(shlex.quote(p) for p in packages)
    return Fact(f"dpkg-query -W -f='${{Package}}\\t${{Status}}\\n' {names}",
                parse_dpkg_installed)


def rpm_installed(packages: tuple[str, ...]) -> Fact[set[str]]:
    """Which of ``packages`` rpm has installed (RHEL family); process stdout and stderr."""
    names = " ".join(shlex.quote(p) for p in packages)
    return Fact(f"rpm -q {names}", partial(parse_rpm_installed, wanted=packages))


GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[^)]+)\)")
MIG_LINE = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)]+)\)")


@dataclass(frozen=True)
class ListedDevice:
    name: str  # product name ("GRID A100D-1-10C") or MIG profile ("1g.10gb")
    uuid: str  # GPU-... or MIG-...
    parent: int | None = None  # a MIG device: the position of its GPU in the listing


@dataclass(frozen=True)
class GpuListing:
    """What ``nvidia-smi -L`` shows: GPUs (a vGPU is a GPU in its guest) and MIG devices."""

    gpu_devices: tuple[ListedDevice, ...] = ()
    mig_devices: tuple[ListedDevice, ...] = ()

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.gpu_devices)

    @property
    def mig_profiles(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.mig_devices)

    @property
    def vgpu_types(self) -> tuple[str, ...]:
        return tuple(name.removeprefix("GRID ").removeprefix("NVIDIA ") for name in self.gpus)

    def mig_devices_of(self, gpu: int) -> tuple[ListedDevice, ...]:
        """The MIG devices listed under GPU ``gpu`` (its position in the listing)."""
        return tuple(d for d in self.mig_devices if d.parent == gpu)

    def compute_device(self, gpu: int) -> ListedDevice | None:
        """What CUDA and ``docker --gpus device=`` address for GPU ``gpu``: the one MIG
        device under it where it has exactly one (a MIG-backed vGPU shows its GPU instance
        that way, and CUDA sees only the MIG device), else the GPU itself. None: the
        listing has no such GPU."""
        if not 0 <= gpu < len(self.gpu_devices):
            return None
        children = self.mig_devices_of(gpu)
        return children[0] if len(children) == 1 else self.gpu_devices[gpu]

    def compute_devices(self) -> tuple[ListedDevice, ...]:
        """``compute_device`` of every listed GPU, in listing order."""
        return tuple(d for k in range(len(self.gpu_devices))
                     if (d := self.compute_device(k)) is not None)

    def mig_uuids(self) -> dict[str, list[str]]:
        """MIG profile -> the UUIDs of its devices, in listing order."""
        found: dict[str, list[str]] = {}
        for device in self.mig_devices:
            found.setdefault(device.name, []).append(device.uuid)
        return found

    def summary(self) -> str:
        gpus = ", ".join(self.gpus) or "no GPU"
        migs = ", ".join(f"MIG {p}" for p in self.mig_profiles)
        return f"{gpus}; {migs}" if migs else gpus


def parse_gpu_list(text: str) -> GpuListing:
    """The output of ``nvidia-smi -L`` (GPU_LIST); the one parser of it in vgpu."""
    gpus, migs = [], []
    for line in text.splitlines():
        if match := GPU_LINE.match(line):
            gpus.append(ListedDevice(match.group(2).strip(), match.group(3)))
        elif match := MIG_LINE.match(line):
            migs.append(ListedDevice(match.group(1), match.group(3), len(gpus) - 1))
    return GpuListing(tuple(gpus), tuple(migs))


GPU_LIST = Fact("nvidia-smi -L", parse_gpu_list)


LICENSE_LINE = re.compile(r"^\s*License Status\s*:\s*(.+?)\s*$", re.MULTILINE)


def parse_license_status(text: str) -> list[str]:
    """Every ``License Status`` value in ``nvidia-smi -q`` output (one per GPU)."""
    return LICENSE_LINE.findall(text)


LICENSE_STATUS = Fact("nvidia-smi -q", parse_license_status)


def is_licensed(statuses: list[str]) -> bool:
    return bool(statuses) and all(s.startswith("Licensed") for s in statuses)


def parse_driver_versions(text: str) -> set[str]:
    """``nvidia-smi --query-gpu=driver_version --format=csv,noheader``."""
    return {line.strip() for line in text.splitlines() if line.strip()}


DRIVER_VERSIONS = Fact("nvidia-smi --query-gpu=driver_version --format=csv,noheader",
                       parse_driver_versions)


FEATURE_TYPE_LINE = re.compile(r"^[ \t]*FeatureType[ \t]*=[ \t]*(\d+)[ \t]*$", re.MULTILINE)


def gridd_feature_type(conf: str) -> int | None:
    values = FEATURE_TYPE_LINE.findall(conf)
    return int(values[-1]) if values else None


def with_feature_type(conf: str, feature_type: int) -> str:
    """The gridd.conf text with FeatureType set; every other line kept as it was."""
    line = f"FeatureType={feature_type}"
    if FEATURE_TYPE_LINE.search(conf):
        return FEATURE_TYPE_LINE.sub(line, conf)
    body = conf if not conf or conf.endswith("\n") else conf + "\n"
    return f"{body}{line}\n"
