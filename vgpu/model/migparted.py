"""NVIDIA mig-parted configs (``version: v1``) as a scenario's input: read one named config
into per-GPU MIG layouts checked by vgpu's solver, and expand a bare-metal scenario's
``mig_parted: {file, config}`` into its ``vms`` before the scenario is validated. The
writer (a plan's or NVML's layouts as a config) is ``vgpu.migparted``.

    version: v1
    mig-configs:
      vgpu-bm8:
        - devices: [0]
          mig-enabled: true
          mig-devices: {"1g.10gb": 7}

A GPU with ``mig-enabled: false`` is used whole (a passthrough instance on bare metal).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vgpu import mig
from vgpu.errors import InputError, Problem
from vgpu.model.yamlsource import Loc, SourceDoc, format_loc, load_yaml

VERSION = "v1"
CONFIGS_KEY = "mig-configs"
TOP_KEYS = ("version", CONFIGS_KEY)
ENTRY_KEYS = ("devices", "mig-enabled", "mig-devices", "device-filter")
PASSTHROUGH = "passthrough"
NVIDIA_VENDOR_ID = 0x10DE
# mig-parted's spelling of a MIG device: [<C>c.]<G>g.<M>gb with optional +attributes.
_PARTED_PROFILE = re.compile(r"^(?:\d+c\.)?\d+g\.\d+gb(?:\+[a-z.]+)*$")


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

    def __init__(self, doc: SourceDoc, config: str, gpu: mig.GpuModel) -> None:
        self.doc, self.config, self.gpu = doc, config, gpu
        self.problems: list[Problem] = []

    def problem(self, loc: Loc, message: str, fix: str) -> None:
        self.problems.append(Problem(self.doc.path, format_loc(loc), message,
                                     line=self.doc.line_of(loc), fix=fix))

    def configs(self) -> dict[Any, Any]:
        """The file's configs after mig-parted's top-level rules."""
        data = self.doc.data
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

    def entry_format(self, loc: Loc, entry: object) -> None:
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

    def _devices_format(self, loc: Loc, entry: dict[Any, Any]) -> None:
        if "devices" not in entry:
            self.problem(loc, "devices is missing", fix="add devices: all, or devices: [0]")
            return
        value = entry["devices"]
        if value == "all" or (isinstance(value, list) and all(
                _is_index(d) and d >= 0 for d in value)):
            return
        self.problem((*loc, "devices"), f"devices {value!r} is neither 'all' nor a list of "
                     "GPU indexes", fix="write devices: all, or devices: [0, 1]")

    def _mig_devices_format(self, loc: Loc, entry: dict[Any, Any], enabled: object) -> None:
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

    def profiles(self, loc: Loc, value: object) -> list[str]:
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

    def device_filter(self, loc: Loc, value: object) -> None:
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
        loc: Loc = (CONFIGS_KEY, self.config, k)
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

    def _check_fit(self, loc: Loc, names: list[str]) -> None:
        result = mig.solve(self.gpu, [self.gpu.profile(n) for n in names])
        if result.ok:
            return
        nearest = "; ".join(f"{' + '.join(s.profiles)} ({s.description})"
                            for s in result.suggestions) or "fewer or smaller instances"
        self.problem((*loc, "mig-devices"), f"config '{self.config}' does not fit one "
                     f"{self.gpu.key}: {result.reason}", fix=f"nearest valid layouts: {nearest}")


def read_config(path: Path, config: str, gpu: mig.GpuModel, *,
                gpus_for_all: int = 1) -> list[GpuLayout]:
    """The per-GPU layouts of config ``config`` in mig-parted file ``path`` (``devices:
    all`` stands for GPUs 0..gpus_for_all-1). InputError naming file, line, field and fix."""
    reader = _Reader(load_yaml(path), config, gpu)
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
    if reader.problems:
        raise InputError(reader.problems)
    return sorted(layouts, key=lambda g: g.index)


def _instance_name(scenario_id: str, label: str) -> str:
    return f"{scenario_id}-{label.replace('+', '-')}-{{n}}"


def vm_groups(scenario_id: str, layouts: list[GpuLayout]) -> list[dict[str, Any]]:
    """Scenario ``vms`` entries for the layouts: one harness instance per MIG device or
    whole GPU, grouped by profile, largest first."""
    counts: Counter[str] = Counter()
    for layout in layouts:
        counts.update(layout.profiles if layout.mig_enabled else (PASSTHROUGH,))
    return [{"name": _instance_name(scenario_id, label), "count": n, "vgpus": [label]}
            for label, n in counts.items()]


def expand_scenario(doc: SourceDoc) -> None:
    """A bare-metal scenario naming ``mig_parted: {file, config}`` gets its ``vms`` from
    that config (one instance per MIG device or whole GPU) before it is validated. A
    malformed ``mig_parted`` itself is left to the scenario model to report."""
    data = doc.data
    ref = data.get("mig_parted") if isinstance(data, dict) else None
    if not isinstance(ref, dict) or not isinstance(ref.get("file"), str) \
            or not isinstance(ref.get("config"), str):
        return
    problem = _scenario_problem(doc, data)
    if problem is not None:
        raise InputError([problem])
    try:
        gpu = mig.gpu_model(str(data.get("gpu")))
    except KeyError:
        return  # the model names the valid GPUs
    path = Path(ref["file"]).expanduser()
    path = path if path.is_absolute() else Path(doc.path).parent / path
    if not path.is_file():
        raise InputError([Problem(doc.path, "mig_parted.file", f"{ref['file']} does not exist",
                                  line=doc.line_of(("mig_parted", "file")),
                                  fix="give the mig-parted file's path relative to the "
                                      "scenario file")])
    gpus = ref.get("gpus", 1)
    layouts = read_config(path, ref["config"], gpu,
                          gpus_for_all=gpus if isinstance(gpus, int) and gpus > 0 else 1)
    data["vms"] = vm_groups(str(data.get("id", "mig")), layouts)


def _scenario_problem(doc: SourceDoc, data: dict[str, Any]) -> Problem | None:
    if "vms" in data:
        return Problem(doc.path, "mig_parted", "both 'vms' and 'mig_parted' are given",
                       line=doc.line_of(("mig_parted",)),
                       fix="keep one: mig_parted names the instances through its config")
    if data.get("platform") != "bare-metal":
        return Problem(doc.path, "mig_parted", "mig_parted describes a bare-metal host's "
                       "GPUs", line=doc.line_of(("mig_parted",)),
                       fix="set platform: bare-metal, or list vms with their vGPUs")
    return None
