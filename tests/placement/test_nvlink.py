"""A P2P VM that passes two GPUs through gets a pair the inventory says NVLink bridges
(nvlink_pairs), when one is free; without P2P, or with no free pair, the first free GPUs."""

from __future__ import annotations

from typing import Any

from vgpu.model.inventory import Inventory
from vgpu.model.scenario import Scenario
from vgpu.planner import HeldVgpu, build_plan

VCENTER = {"host": "vc.lab", "user": "u", "password": {"env": "VC_PASSWORD"}}
PLACEMENT = {"datacenter": "dc", "datastore": "ds", "network": "vm", "template": "tpl"}


def _inventory(pairs: list[list[int]]) -> Inventory:
    return Inventory.model_validate({
        "name": "lab", "vcenter": VCENTER, "placement": PLACEMENT,
        "hosts": [{"name": "h1", "gpus": [{"model": "A100-80GB", "count": 4,
                                           "nvlink_pairs": pairs}]}]})


def _scenario(p2p: bool, count: int = 1) -> Scenario:
    data: dict[str, Any] = {
        "id": "t", "name": "t", "gpu": "A100-80GB", "workloads": [{"model": "resnet50"}],
        "vms": [{"name": "p2p-{n}", "count": count,
                 "vgpus": ["passthrough", "passthrough"]}],
        "vm_settings": {"p2p": p2p}}
    return Scenario.model_validate(data)


def _gpus(plan: Any) -> dict[str, list[int]]:
    return {vm.name: [v.gpu_index for v in vm.vgpus] for vm in plan.vms}


def test_a_p2p_vm_gets_a_bridged_pair() -> None:
    plan = build_plan(_scenario(p2p=True), _inventory([[1, 2]]))
    assert _gpus(plan) == {"p2p-1": [1, 2]}


def test_two_p2p_vms_take_the_bridged_pairs_in_the_inventorys_order() -> None:
    plan = build_plan(_scenario(p2p=True, count=2), _inventory([[3, 0], [1, 2]]))
    assert _gpus(plan) == {"p2p-1": [0, 3], "p2p-2": [1, 2]}


def test_without_p2p_or_a_free_pair_the_first_free_gpus() -> None:
    assert _gpus(build_plan(_scenario(p2p=False), _inventory([[1, 2]]))) == {"p2p-1": [0, 1]}
    held = [HeldVgpu("h1", 2, "other", "passthrough", "passthrough")]
    plan = build_plan(_scenario(p2p=True), _inventory([[1, 2]]), held=held)
    assert _gpus(plan) == {"p2p-1": [0, 1]}
