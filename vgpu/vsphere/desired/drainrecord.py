"""What `vgpu drain` saw of a host before its upgrade, on disk beside the preflight facts,
for `vgpu undrain` to check the upgrade against: one JSON file per host."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vgpu.errors import InputError, ParameterError

DEFAULT_DIR = Path("vgpu-results/upgrade")
HOST = "host"  # the parameter: the host of the window
NOT_DRAINED = "not drained"  # the reason: no drain of the host is recorded
DRAINING, DRAINED = "draining", "drained"


@dataclass
class DrainRecord:
    host: str
    inventory: str  # the inventory file, resolved
    drained_at: str  # ISO 8601 UTC, this machine's clock
    facts_id: str  # the preflight saved just before the drain
    hardware_uuid: str | None
    boot_time: str | None  # runtime.bootTime before the upgrade, the host's clock
    esxi_build: str | None
    host_driver: str | None  # the NVIDIA VIB's "name version"
    # the GPU assignment policy at the drain; one set during the window takes effect only
    # when Xorg restarts or the host boots
    assignment_policy: str | None = None
    vms_shut_down: list[str] = field(default_factory=list)
    baselines: list[str] = field(default_factory=list)  # the baseline sets it is tied to
    undrained_at: str | None = None
    # "draining": written before the first change (a drain killed after it is continued by
    # the next drain); "drained": the host reached maintenance mode
    status: str = DRAINED
    # The GPU stack at the drain, which the upgrade must leave as it was:
    gpus: list[str] = field(default_factory=list)  # the NVIDIA GPUs' PCI ids
    vgpu_types: list[str] = field(default_factory=list)  # vGPU types the host offered
    vgpu_types_in_use: list[str] = field(default_factory=list)  # by vgpu's VMs on it
    graphics: dict[str, str] = field(default_factory=dict)  # pci id -> type in effect
    vgpu_modes: dict[str, str] = field(default_factory=dict)  # pci id -> vgpuMode (8.0 U3+)
    system_vms: list[str] = field(default_factory=list)  # vCLS / agent VMs left to vSphere


def path_for(directory: Path, host: str) -> Path:
    return directory / f"drain-{host}.json"


def save(record: DrainRecord, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = path_for(directory, record.host)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(asdict(record), indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return path


def find(directory: Path, host: str) -> DrainRecord | None:
    """The drain of ``host`` when one is recorded, else None."""
    return load(directory, host) if path_for(directory, host).is_file() else None


def load(directory: Path, host: str) -> DrainRecord:
    """The drain of ``host``, or InputError (exit 2) saying to drain it first."""
    path = path_for(directory, host)
    if not path.is_file():
        raise ParameterError(HOST, f"no drain of host {host} is recorded in {directory}",
                             "drain it before the upgrade (`vgpu drain`: it saves the facts "
                             "the upgrade is checked against)", reason=NOT_DRAINED,
                             details={"host": host})
    try:
        return DrainRecord(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        raise InputError.single(str(path), "(file)", f"not a drain record: {exc}",
                                fix=f"delete it and run `vgpu drain --host {host}` "
                                    "again") from None
