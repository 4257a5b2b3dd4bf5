"""Counting how often inventories are loaded and plans are built, whoever asks (a caller
that imported the function by name included): every inventory load validates its
document against Inventory, every plan places its VMs once."""

from __future__ import annotations

from typing import Any

import pytest

import vgpu.model.load
import vgpu.planner
from vgpu.model.inventory import Inventory


def count_loads_and_plans(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"load_inventory": 0, "build_plan": 0}
    validate, place = vgpu.model.load.validate_doc, vgpu.planner._planned_vms

    def counting_validate(model: type[Any], doc: Any) -> Any:
        calls["load_inventory"] += model is Inventory
        return validate(model, doc)

    def counting_place(*args: Any) -> Any:
        calls["build_plan"] += 1
        return place(*args)

    monkeypatch.setattr(vgpu.model.load, "validate_doc", counting_validate)
    monkeypatch.setattr(vgpu.planner, "_planned_vms", counting_place)
    return calls
