"""pydantic models: inventory, scenario, plan; and their loading with precise errors.

The names below load their modules on first use (PEP 562), so importing a light
submodule such as vgpu.model.yamlsource does not build every pydantic model."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vgpu.model.inventory import Inventory
    from vgpu.model.load import load_inventory, load_scenario
    from vgpu.model.scenario import InferenceWorkload, Scenario, TrainingWorkload

__all__ = [
    "InferenceWorkload",
    "Inventory",
    "Scenario",
    "TrainingWorkload",
    "load_inventory",
    "load_scenario",
]
_HOME = {
    "InferenceWorkload": "vgpu.model.scenario",
    "Inventory": "vgpu.model.inventory",
    "Scenario": "vgpu.model.scenario",
    "TrainingWorkload": "vgpu.model.scenario",
    "load_inventory": "vgpu.model.load",
    "load_scenario": "vgpu.model.load",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)
