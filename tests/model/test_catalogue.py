"""Every shipped scenario and inventory loads and plans; the catalogue resolves ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from vgpu import catalog
from vgpu.model import load_inventory, load_scenario
from vgpu.planner import build_plan

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
INVENTORIES = sorted((ROOT / "inventory").glob("*.yaml"))


def test_catalogue_has_the_studies() -> None:
    ids = {e.id for e in catalog.catalogue()}
    assert {str(i) for i in range(1, 9)} <= ids
    assert {f"bm{i}" for i in range(1, 9)} <= ids
    assert {"train_1vm_2gpu", "train_2vm_1gpu", "train_2vm_2gpu", "train_multinode_1",
            "train_multinode_2", "train_multinode_4", "train_bm_1", "train_bm_2",
            "train_bm_4"} <= ids
    assert catalog.resolve("8").name == "mig_7x1g.yaml"
    assert catalog.resolve("mig_7x1g").name == "mig_7x1g.yaml"


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_loads_and_plans(path: Path) -> None:
    scenario = load_scenario(path)
    plan = build_plan(scenario)
    assert [vm.name for vm in plan.vms] == scenario.vm_names()
    assert plan.plan_hash == plan.compute_hash()
    if scenario.baseline and scenario.baseline.scenario:
        baseline = catalog.load(scenario.baseline.scenario)
        assert baseline.platform == "bare-metal"


@pytest.mark.parametrize("path", INVENTORIES, ids=[p.stem for p in INVENTORIES])
def test_every_inventory_loads(path: Path) -> None:
    inventory = load_inventory(path)
    assert inventory.name


def test_vm_scenarios_match_their_bare_metal_layouts() -> None:
    for i in range(1, 9):
        vm_plan = build_plan(catalog.load(str(i)))
        bm_plan = build_plan(catalog.load(f"bm{i}"))
        layout = sorted((v.vgpus[0].label, v.vgpus[0].start) for v in vm_plan.vms)
        assert layout == sorted((v.vgpus[0].label, v.vgpus[0].start) for v in bm_plan.vms)


def test_unknown_scenario_id_lists_valid_ones() -> None:
    from vgpu.errors import InputError

    with pytest.raises(InputError) as info:
        catalog.resolve("99")
    assert "no scenario with id '99'" in str(info.value)
    assert "bm6" in str(info.value)
