"""NVIDIA mig-parted configs (``version: v1``): read one named config into per-GPU MIG
layouts checked by vgpu's solver, and write layouts (a planned scenario's, or what NVML
shows now) as a config mig-parted applies unchanged.

    version: v1
    mig-configs:
      vgpu-bm8:
        - devices: [0]
          mig-enabled: true
          mig-devices: {"1g.10gb": 7}

A GPU with ``mig-enabled: false`` is used whole (a passthrough instance on bare metal).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from vgpu import mig
from vgpu.errors import InputError, Problem
from vgpu.model.plan import Plan, PlannedGpu
from vgpu.model.yamlsource import Loc, SourceDoc, format_loc, load_yaml

VERSION = "v1"
CONFIGS_KEY = "mig-configs"
ENTRY_KEYS = ("devices", "mig-enabled", "mig-devices", "device-filter")
PASSTHROUGH = "passthrough"


@dataclass(frozen=True)
class GpuLayout:
    """One GPU of a config: MIG off (used whole) or MIG on with these instances."""

    index: int
    mig_enabled: bool
    profiles: tuple[str, ...] = ()


# --- reading ------------------------------------------------------------------------------


class _Reader:
    """Collects every problem of one config before giving up, each at its file line."""

    def __init__(self, doc: SourceDoc, config: str, gpu: mig.GpuModel) -> None:
        self.doc, self.config, self.gpu = doc, config, gpu
        self.problems: list[Problem] = []

    def problem(self, loc: Loc, message: str, fix: str) -> None:
        self.problems.append(Problem(self.doc.path, format_loc(loc), message,
                                     line=self.doc.line_of(loc), fix=fix))

    def entries(self) -> list[Any]:
        data = self.doc.data
        if not isinstance(data, dict):
            self.problem((), "a mig-parted config file is a mapping",
                         fix=f"start it with 'version: {VERSION}' and '{CONFIGS_KEY}:'")
            return []
        if data.get("version") != VERSION:
            self.problem(("version",), f"version is {data.get('version')!r}; vgpu reads "
                         f"mig-parted version {VERSION}", fix=f"set version: {VERSION}")
        configs = data.get(CONFIGS_KEY)
        if not isinstance(configs, dict):
            self.problem((CONFIGS_KEY,), f"no '{CONFIGS_KEY}' mapping",
                         fix=f"add '{CONFIGS_KEY}:' with named configs")
            return []
        if self.config not in configs:
            self.problem((CONFIGS_KEY,), f"no config named '{self.config}'",
                         fix=f"use one of: {', '.join(map(str, configs)) or 'none defined'}")
            return []
        entries = configs[self.config]
        if not isinstance(entries, list) or not entries:
            self.problem((CONFIGS_KEY, self.config), "a config is a non-empty list of "
                         "entries", fix="list entries with devices, mig-enabled, mig-devices")
            return []
        return entries

    def devices(self, loc: Loc, value: object, gpus_for_all: int) -> list[int]:
        if value is None or value == "all":
            return list(range(gpus_for_all))
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if isinstance(value, list) and value and all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value):
            return list(value)
        self.problem((*loc, "devices"), f"devices {value!r} is neither 'all' nor a list of "
                     "GPU indexes", fix="write devices: all, or devices: [0, 1]")
        return []

    def profiles(self, loc: Loc, value: object) -> list[str]:
        if not isinstance(value, dict):
            self.problem((*loc, "mig-devices"), "mig-devices is a mapping of profile to count",
                         fix='write mig-devices: {"1g.10gb": 7}')
            return []
        names: list[str] = []
        for key, count in value.items():
            try:
                name = mig.parse_mig_profile(str(key), self.gpu).name
            except mig.ProfileParseError as exc:
                self.problem((*loc, "mig-devices", str(key)), str(exc),
                             fix="use one of the valid names")
                continue
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                self.problem((*loc, "mig-devices", str(key)), f"count {count!r} is not a "
                             "whole number >= 0", fix="give how many instances, e.g. 2")
                continue
            names += [name] * count
        return names

    def entry(self, k: int, entry: object, gpus_for_all: int) -> list[GpuLayout]:
        loc: Loc = (CONFIGS_KEY, self.config, k)
        if not isinstance(entry, dict):
            self.problem(loc, "an entry is a mapping", fix="give devices, mig-enabled, "
                         "mig-devices")
            return []
        for key in entry:
            if key not in ENTRY_KEYS:
                self.problem((*loc, str(key)), f"unknown key '{key}'",
                             fix=f"valid keys here: {', '.join(ENTRY_KEYS)}")
        enabled = entry.get("mig-enabled")
        if not isinstance(enabled, bool):
            self.problem((*loc, "mig-enabled"), "mig-enabled must be true or false",
                         fix="add mig-enabled: true (or false for a whole GPU)")
            return []
        indexes = self.devices(loc, entry.get("devices"), gpus_for_all)
        names = self.profiles(loc, entry.get("mig-devices", {})) if enabled else []
        if not enabled and entry.get("mig-devices"):
            self.problem((*loc, "mig-devices"), "mig-devices on a GPU with mig-enabled: false",
                         fix="set mig-enabled: true, or remove mig-devices")
        if names:
            self._check_fit(loc, names)
        return [GpuLayout(i, enabled, tuple(names)) for i in indexes]

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
    all`` stands for GPUs 0..gpus_for_all-1). InputError naming file, field and fix."""
    reader = _Reader(load_yaml(path), config, gpu)
    layouts: list[GpuLayout] = []
    for k, entry in enumerate(reader.entries()):
        layouts += reader.entry(k, entry, gpus_for_all)
    seen = Counter(g.index for g in layouts)
    for index in sorted(i for i, n in seen.items() if n > 1):
        reader.problem((CONFIGS_KEY, config), f"GPU {index} is named by more than one entry",
                       fix="name each GPU in one entry only")
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


# --- writing ------------------------------------------------------------------------------


def _entries(layouts: list[GpuLayout], gpu: mig.GpuModel | None) -> list[dict[str, Any]]:
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


def _sorted_profiles(profiles: tuple[str, ...], gpu: mig.GpuModel | None) -> tuple[str, ...]:
    if gpu is None:
        return tuple(sorted(profiles))
    order = {name: k for k, name in enumerate(reversed(gpu.profile_names()))}
    return tuple(sorted(profiles, key=lambda p: (order.get(p, len(order)), p)))


def layouts_from_plan(plan: Plan) -> dict[str, list[GpuLayout]]:
    """Host -> the layouts of its GPUs that the plan uses (MIG or whole)."""
    out: dict[str, list[GpuLayout]] = {}
    for g in plan.gpus:
        layout = _layout_of(g)
        if layout is not None:
            out.setdefault(g.host, []).append(layout)
    return out


def _layout_of(g: PlannedGpu) -> GpuLayout | None:
    if g.mode == "mig":
        return GpuLayout(g.index, True, tuple(s.profile for s in g.slices if not s.foreign))
    if g.mode == "passthrough":
        return GpuLayout(g.index, False)
    return None


def render(configs: dict[str, list[GpuLayout]], gpu: mig.GpuModel | None,
           header: list[str]) -> str:
    """A mig-parted file with one config per name, ``header`` as comment lines."""
    body = {"version": VERSION,
            CONFIGS_KEY: {name: _entries(layouts, gpu) for name, layouts in configs.items()}}
    comments = "".join(f"# {line}\n" for line in header)
    return comments + yaml.safe_dump(body, sort_keys=False, default_flow_style=None)
