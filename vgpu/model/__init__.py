"""pydantic models: inventory, scenario, plan; and their loading with precise errors."""

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
