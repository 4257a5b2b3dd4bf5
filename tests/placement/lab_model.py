"""A small lab in code for planner tests: two hosts of A100-80GB (h1 with two GPUs, h2
with one), and scenarios of the given VMs on A100-80GB running resnet50."""

from __future__ import annotations

from typing import Any

from vgpu.model.inventory import Inventory
from vgpu.model.scenario import Scenario

VCENTER = {"host": "vc.lab", "user": "u", "password": {"env": "VC_PASSWORD"}}
PLACEMENT = {"datacenter": "dc", "datastore": "ds", "network": "vm", "template": "tpl"}
TWO_HOSTS = [
    {"name": "h1", "gpus": [{"model": "A100-80GB", "count": 2,
                             "pci_ids": ["0000:17:00.0", "0000:65:00.0"]}]},
    {"name": "h2", "gpus": [{"model": "A100-80GB"}]},
]


def scenario(vms: list[dict[str, Any]], **fields: Any) -> Scenario:
    return Scenario.model_validate({"id": "t", "name": "t", "gpu": "A100-80GB", "vms": vms,
                                    "workloads": [{"model": "resnet50"}], **fields})


def inventory(hosts: list[dict[str, Any]] | None = None, **fields: Any) -> Inventory:
    return Inventory.model_validate({"name": "lab", "vcenter": VCENTER, "placement": PLACEMENT,
                                     "hosts": TWO_HOSTS if hosts is None else hosts, **fields})
