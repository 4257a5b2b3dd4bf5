"""NVIDIA mig-parted configs written from layouts (a planned scenario's, or what NVML shows
now), as a config mig-parted applies unchanged. The format and its reader are
``vgpu.model.migparted``."""

from __future__ import annotations

from collections import Counter
from typing import Any

import yaml

from vgpu import mig
from vgpu.model.migparted import CONFIGS_KEY, VERSION, GpuLayout
from vgpu.model.plan import Plan, PlannedGpu


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
