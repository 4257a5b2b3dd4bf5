"""NVIDIA mig-parted configs (``version: v1``): their rules, read into per-GPU MIG layouts
checked by vgpu's solver, and layouts (a planned scenario's, or what NVML shows now)
written as a config mig-parted applies unchanged.

    version: v1
    mig-configs:
      vgpu-bm8:
        - devices: [0]
          mig-enabled: true
          mig-devices: {"1g.10gb": 7}

A GPU with ``mig-enabled: false`` is used whole (a passthrough instance on bare metal).
Reading works on the parsed document and reports each problem at its place in it (a path
of keys); the loader that knows the file's lines is ``vgpu.model.load.read_config``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import yaml

from vgpu.mig.catalogue import GpuModel
from vgpu.mig.solver import solve

VERSION = "v1"
CONFIGS_KEY = "mig-configs"
TOP_KEYS = ("version", CONFIGS_KEY)
ENTRY_KEYS = ("devices", "mig-enabled", "mig-devices", "device-filter")
NVIDIA_VENDOR_ID = 0x10DE
# mig-parted's spelling of a MIG device: [<C>c.]<G>g.<M>gb with optional +attributes.
_PARTED_PROFILE = re.compile(r"^(?:\d+c\.)?\d+g\.\d+gb(?:\+[a-z.]+)*$")


Where = tuple[str | int, ...]  # a place in the document: its keys and list indexes


@dataclass(frozen=True)
class ConfigProblem:
    """One broken rule, at its place in the document, with how to mend it."""

    where: Where
    message: str
    fix: str


@dataclass(frozen=True)
class GpuLayout:
    """One GPU of a config: MIG off (used whole) or MIG on with these instances."""

    index: int
    mig_enabled: bool
    profiles: tuple[str, ...] = ()


# --- reading ------------------------------------------------------------------------------
# mig-parted's own rules (what `nvidia-mig-parted assert --valid-config` refuses) apply to
# the whole file; vgpu's (the profile exists on the GPU, the layout fits, the device
# filter matches the GPU, each GPU in one entry) to the config it reads.


def _is_index(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Reader:
    """Collects every problem of one config before giving up, each at its file line."""

    def __init__(self, data: object, config: str, gpu: GpuModel) -> None:
        self.data, self.config, self.gpu = data, config, gpu
        self.problems: list[ConfigProblem] = []

    def problem(self, loc: Where, message: str, fix: str) -> None:
        self.problems.append(ConfigProblem(loc, message, fix))

    def configs(self) -> dict[Any, Any]:
        """The file's configs after mig-parted's top-level rules."""
        data = self.data
        if not isinstance(data, dict):
            self.problem((), "a mig-parted config file is a mapping",
                         fix=f"start it with 'version: {VERSION}' and '{CONFIGS_KEY}:'")
            return {}
        for key in data:
            if key not in TOP_KEYS:
                self.problem((str(key),), f"unknown key '{key}'",
                             fix=f"valid keys here: {', '.join(TOP_KEYS)}")
        if data.get("version") != VERSION:
            self.problem(("version",), f"version is {data.get('version')!r}; vgpu reads "
                         f"mig-parted version {VERSION}", fix=f"set version: {VERSION}")
        configs = data.get(CONFIGS_KEY)
        if not isinstance(configs, dict) or not configs:
            self.problem((CONFIGS_KEY,), f"no '{CONFIGS_KEY}' mapping with at least one "
                         "config", fix=f"add '{CONFIGS_KEY}:' with named configs")
            return {}
        for name, entries in configs.items():
            if not isinstance(entries, list) or not entries:
                self.problem((CONFIGS_KEY, name), f"config '{name}' is not a non-empty list "
                             "of entries", fix="list entries with devices, mig-enabled, "
                             "mig-devices")
                continue
            for k, entry in enumerate(entries):
                self.entry_format((CONFIGS_KEY, name, k), entry)
        return configs

    def entries(self) -> list[Any]:
        configs = self.configs()
        if configs and self.config not in configs:
            self.problem((CONFIGS_KEY,), f"no config named '{self.config}'",
                         fix=f"use one of: {', '.join(map(str, configs))}")
        entries = configs.get(self.config)
        return entries if isinstance(entries, list) else []

    def entry_format(self, loc: Where, entry: object) -> None:
        """mig-parted's rules for one entry."""
        if not isinstance(entry, dict):
            self.problem(loc, "an entry is a mapping", fix="give devices, mig-enabled, "
                         "mig-devices")
            return
        for key in entry:
            if key not in ENTRY_KEYS:
                self.problem((*loc, str(key)), f"unknown key '{key}'",
                             fix=f"valid keys here: {', '.join(ENTRY_KEYS)}")
        self._devices_format(loc, entry)
        enabled = entry.get("mig-enabled")
        if not isinstance(enabled, bool):
            self.problem((*loc, "mig-enabled") if "mig-enabled" in entry else loc,
                         "mig-enabled must be true or false",
                         fix="add mig-enabled: true (or false for a whole GPU)")
        self._mig_devices_format(loc, entry, enabled)
        if "device-filter" in entry:
            value = entry["device-filter"]
            if not (isinstance(value, str) or (isinstance(value, list) and
                                               all(isinstance(v, str) for v in value))):
                self.problem((*loc, "device-filter"), f"device-filter {value!r} is neither "
                             "a PCI device id nor a list of them",
                             fix="write device-filter: \"0x20B510DE\" (device, vendor)")

    def _devices_format(self, loc: Where, entry: dict[Any, Any]) -> None:
        if "devices" not in entry:
            self.problem(loc, "devices is missing", fix="add devices: all, or devices: [0]")
            return
        value = entry["devices"]
        if value == "all" or (isinstance(value, list) and all(
                _is_index(d) and d >= 0 for d in value)):
            return
        self.problem((*loc, "devices"), f"devices {value!r} is neither 'all' nor a list of "
                     "GPU indexes", fix="write devices: all, or devices: [0, 1]")

    def _mig_devices_format(self, loc: Where, entry: dict[Any, Any], enabled: object) -> None:
        if "mig-devices" not in entry:
            if enabled is True:
                self.problem(loc, "mig-devices is missing on a GPU with mig-enabled: true",
                             fix='add mig-devices: {"1g.10gb": 7} (or {} for none yet)')
            return
        value = entry["mig-devices"]
        if not isinstance(value, dict):
            self.problem((*loc, "mig-devices"), "mig-devices is a mapping of profile to count",
                         fix='write mig-devices: {"1g.10gb": 7}')
            return
        if enabled is False and value:
            self.problem((*loc, "mig-devices"), "mig-devices on a GPU with mig-enabled: false",
                         fix="set mig-enabled: true, or remove mig-devices")
        for key, count in value.items():
            if not _PARTED_PROFILE.match(str(key)):
                self.problem((*loc, "mig-devices", str(key)), f"'{key}' is not a MIG device "
                             "as mig-parted writes one", fix="write e.g. 1g.10gb or 3g.40gb")
            if not _is_index(count) or count < 0:
                self.problem((*loc, "mig-devices", str(key)), f"count {count!r} is not a "
                             "whole number >= 0", fix="give how many instances, e.g. 2")

    def indexes(self, value: object, gpus_for_all: int) -> list[int]:
        if value == "all":
            return list(range(gpus_for_all))
        return list(value) if isinstance(value, list) else []

    def profiles(self, loc: Where, value: object) -> list[str]:
        """vgpu's rule: every profile exists on this GPU."""
        names: list[str] = []
        for key, count in (value.items() if isinstance(value, dict) else ()):
            if not _PARTED_PROFILE.match(str(key)) or not _is_index(count) or count < 0:
                continue  # mig-parted's format problem, already reported
            try:
                name = self.gpu.profile(str(key)).name
            except KeyError:
                self.problem((*loc, "mig-devices", str(key)), f"'{key}' is not a MIG profile "
                             f"of {self.gpu.key}; it cannot exist on this GPU",
                             fix=f"use one of: {', '.join(self.gpu.profile_names())}")
                continue
            names += [name] * count
        return names

    def device_filter(self, loc: Where, value: object) -> None:
        """vgpu's rule: a device filter matches the GPU, else mig-parted skips the entry
        on every GPU of this host and the config applies nothing."""
        filters = [value] if isinstance(value, str) else value
        if not isinstance(filters, list) or not filters:
            return
        ids = ", ".join(f"0x{d:04X}{NVIDIA_VENDOR_ID:04X}" for d in self.gpu.pci_device_ids)
        if not any(self._matches(str(f)) for f in filters):
            self.problem((*loc, "device-filter"), f"device-filter {value!r} matches no "
                         f"{self.gpu.key} (PCI device ids {ids})",
                         fix=f"use one of {ids}, or remove device-filter")

    def _matches(self, text: str) -> bool:
        try:
            raw = int(text.split(":")[0], 0)
        except ValueError:
            return False
        return raw & 0xFFFF == NVIDIA_VENDOR_ID and raw >> 16 in self.gpu.pci_device_ids

    def entry(self, k: int, entry: object, gpus_for_all: int) -> list[GpuLayout]:
        loc: Where = (CONFIGS_KEY, self.config, k)
        if not isinstance(entry, dict) or not isinstance(entry.get("mig-enabled"), bool):
            return []  # mig-parted's format problem, already reported
        enabled = entry["mig-enabled"]
        if "device-filter" in entry:
            self.device_filter(loc, entry["device-filter"])
        names = self.profiles(loc, entry.get("mig-devices")) if enabled else []
        if names:
            self._check_fit(loc, names)
        return [GpuLayout(i, enabled, tuple(names))
                for i in self.indexes(entry.get("devices"), gpus_for_all)]

    def _check_fit(self, loc: Where, names: list[str]) -> None:
        result = solve(self.gpu, [self.gpu.profile(n) for n in names])
        if result.ok:
            return
        nearest = "; ".join(f"{' + '.join(s.profiles)} ({s.description})"
                            for s in result.suggestions) or "fewer or smaller instances"
        self.problem((*loc, "mig-devices"), f"config '{self.config}' does not fit one "
                     f"{self.gpu.key}: {result.reason}", fix=f"nearest valid layouts: {nearest}")


def read_layouts(data: object, config: str, gpu: GpuModel, *,
                 gpus_for_all: int = 1) -> tuple[list[GpuLayout], list[ConfigProblem]]:
    """The per-GPU layouts of config ``config`` in a parsed mig-parted document (``devices:
    all`` stands for GPUs 0..gpus_for_all-1), and every rule it breaks (none: usable)."""
    reader = _Reader(data, config, gpu)
    layouts: list[GpuLayout] = []
    for k, entry in enumerate(reader.entries()):
        layouts += reader.entry(k, entry, gpus_for_all)
    seen = Counter(g.index for g in layouts)
    for index in sorted(i for i, n in seen.items() if n > 1):
        reader.problem((CONFIGS_KEY, config), f"GPU {index} is named by more than one entry",
                       fix="name each GPU in one entry only")
    if not reader.problems and not layouts:
        reader.problem((CONFIGS_KEY, config), f"config '{config}' names no GPU",
                       fix="give devices: all, or the GPU indexes")
    return sorted(layouts, key=lambda g: g.index), reader.problems


# --- writing ------------------------------------------------------------------------------


def _entries(layouts: list[GpuLayout], gpu: GpuModel | None) -> list[dict[str, Any]]:
    """One entry per distinct layout, naming the GPUs that carry it."""
    grouped: dict[tuple[bool, tuple[str, ...]], list[int]] = {}
    for layout in sorted(layouts, key=lambda g: g.index):
        key = (layout.mig_enabled, _sorted_profiles(layout.profiles, gpu))
        grouped.setdefault(key, []).append(layout.index)
    entries: list[dict[str, Any]] = []
    for (enabled, profiles), indexes in grouped.items():
        entry: dict[str, Any] = {"devices": indexes, "mig-enabled": enabled}
        if enabled:
            entry["mig-devices"] = dict(Counter(profiles))
        entries.append(entry)
    return entries


def _sorted_profiles(profiles: tuple[str, ...], gpu: GpuModel | None) -> tuple[str, ...]:
    if gpu is None:
        return tuple(sorted(profiles))
    order = {name: k for k, name in enumerate(reversed(gpu.profile_names()))}
    return tuple(sorted(profiles, key=lambda p: (order.get(p, len(order)), p)))


def render(configs: dict[str, list[GpuLayout]], gpu: GpuModel | None,
           header: list[str]) -> str:
    """A mig-parted file with one config per name, ``header`` as comment lines."""
    body = {"version": VERSION,
            CONFIGS_KEY: {name: _entries(layouts, gpu) for name, layouts in configs.items()}}
    comments = "".join(f"# {line}\n" for line in header)
    return comments + yaml.safe_dump(body, sort_keys=False, default_flow_style=None)
