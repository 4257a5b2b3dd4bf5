"""Shared set-up for the NVML layer tests: a simulated A100 80GB with its state in a
temporary folder, the layout state store beside it, and plans of the bare-metal scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest

from vgpu import catalog
from vgpu.nvml.from_plan import layouts_from_plan
from vgpu.nvml.simulator import SimulatedGpuBackend
from vgpu.nvml.spec import LayoutSpec
from vgpu.nvml.state import StateStore
from vgpu.planner import build_plan


@pytest.fixture
def sim(tmp_path: Path) -> SimulatedGpuBackend:
    return SimulatedGpuBackend(["A100-80GB"], state_file=tmp_path / "simgpu.json",
                               mig_enabled=True)


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    return StateStore(directory=tmp_path / "state")


def layout_of(scenario_id: str) -> LayoutSpec:
    [spec] = layouts_from_plan(build_plan(catalog.load(scenario_id)))
    return spec
