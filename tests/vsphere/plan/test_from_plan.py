"""Joining vCenter facts with the planner (pure): which GPU each held vGPU is counted on, and
how a plan's vGPU types become the exact names a host offers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from vgpu import catalog, mig
from vgpu.errors import InputError
from vgpu.model.inventory import Inventory
from vgpu.planner import build_plan
from vgpu.vsphere.desired.vm import OwnerMarks
from vgpu.vsphere.plan.from_plan import desired_from_plan, held_from_facts
from vgpu.vsphere.read.facts import GpuDevice, HostFacts, VmActual

A100 = mig.gpu_model("A100-80GB")
PCI = ["0000:17:00.0", "0000:37:00.0"]


def host(name: str = "esx1", types: list[str] | None = None, gpus: int = 2) -> HostFacts:
    return HostFacts(
        name=name, connection_state="connected", in_maintenance=False, version="8.0.2",
        build="1", full_name="VMware ESXi 8.0.2",
        gpus=[GpuDevice(p, 0x10DE, 0x20B5, "A100") for p in PCI[:gpus]],
        vgpu_types=types if types is not None else ["grid_a100d-1-10c", "grid_a100d-7-80c"],
        graphics_default_type="sharedDirect")


def vm(name: str, vgpus: tuple[str, ...] = (), passthrough: tuple[str, ...] = (),
       scenario: str | None = None, on: str = "esx1") -> VmActual:
    marks = OwnerMarks(scenario, "h").as_extra_config() if scenario else {}
    return VmActual(name=name, ref=None, host=on, powered_on=True, num_cpus=4, memory_mb=4096,
                    firmware="efi", memory_reservation_locked=True, guest_id=None,
                    is_template=False, extra_config=marks, vgpus=vgpus, vgpu_devices=(),
                    passthrough_ids=passthrough, passthrough_devices=(), ip=None,
                    pending_customization=False)


def by_vm(held: list[object]) -> dict[str, tuple[int, str, str]]:
    return {h.vm: (h.gpu_index, h.kind, h.label) for h in held}  # type: ignore[attr-defined]


def test_held_mig_vgpus_are_packed_largest_first_onto_the_first_gpu_with_room() -> None:
    vms = {v.name: v for v in [
        vm("a", ("grid_a100d-4-40c",)), vm("b", ("grid_a100d-4-40c",)),
        vm("c", ("grid_a100d-2-20c",)), vm("mine", ("grid_a100d-7-80c",), scenario="8"),
        vm("elsewhere", ("grid_a100d-7-80c",), on="esx2"),
    ]}
    held, notes = held_from_facts({"esx1": host()}, vms, "8", A100)
    assert by_vm(held) == {"a": (0, "mig", "4g.40gb"), "b": (1, "mig", "4g.40gb"),
                           "c": (0, "mig", "2g.20gb")}
    assert notes == []


def test_time_sliced_and_passthrough_take_whole_gpus_and_other_boards_are_noted() -> None:
    vms = {v.name: v for v in [
        vm("pt", passthrough=(PCI[0],)), vm("ts", ("grid_a100d-20c",)),
        vm("old", ("grid_v100-8q",)),
    ]}
    held, notes = held_from_facts({"esx1": host()}, vms, "8", A100)
    assert by_vm(held) == {"pt": (0, "passthrough", "passthrough"),
                           "ts": (1, "timesliced", "A100D-20C")}
    assert notes == ["esx1: VM old holds grid_v100-8q, not a A100-80GB type; not counted"]


def _inventory(gpus: int = 1) -> Inventory:
    return Inventory.model_validate({
        "name": "t",
        "vcenter": {"host": "vc", "user": "u", "password": {"env": "X"}},
        "placement": {"datacenter": "DC", "datastore": "ds", "network": "net",
                      "template": "tpl"},
        "hosts": [{"name": "esx1", "gpus": [{"model": "A100-80GB", "count": gpus}]}],
        "network": {"ip_pool": {"start": "10.0.0.10", "end": "10.0.0.20",
                                "gateway": "10.0.0.1", "dns": ["10.0.0.2"]}},
    })


def test_plan_vgpu_types_become_the_names_the_host_offers() -> None:
    plan = build_plan(catalog.load("5"), _inventory())
    hopper_style = host(types=["nvidia_a100d-1-10c"])
    [desired] = desired_from_plan(plan, _inventory(), {"esx1": hopper_style}, "inv.yaml")
    assert desired.vgpus == ("nvidia_a100d-1-10c",)
    assert desired.owner == OwnerMarks("5", plan.plan_hash, lab="t")
    assert desired.all_extra_config()["vgpu.lab"] == "t"
    assert desired.network is not None
    assert (desired.network.ip, desired.network.gateway, desired.network.dns) == (
        "10.0.0.10", "10.0.0.1", ("10.0.0.2",))
    assert desired.extra_config["pciPassthru.64bitMMIOSizeGB"] == "64"
    assert desired.guest_id == "ubuntu64Guest"


def test_a_type_the_host_lacks_names_the_candidates_and_what_it_offers() -> None:
    plan = build_plan(catalog.load("5"), _inventory())
    with pytest.raises(InputError) as caught:
        desired_from_plan(plan, _inventory(), {"esx1": host(types=["grid_a100d-7-80c"])},
                          "inv.yaml")
    text = str(caught.value)
    assert ("needs 1g.10gb (grid_a100d-1-10c, nvidia_a100d-1-10c, grid_a100dx-1-10c, "
            "nvidia_a100dx-1-10c)") in text
    assert "esx1 offers: grid_a100d-7-80c" in text


def test_held_vgpus_move_the_plan_or_refuse_it() -> None:
    held, _ = held_from_facts({"esx1": host(gpus=1)},
                              {"x": vm("x", ("grid_a100d-4-40c",))}, "1", A100)
    with pytest.raises(InputError, match=r"no room for VM s1-7g \(7g.80gb\)"):
        build_plan(catalog.load("1"), _inventory(), held=held)
    plan = build_plan(catalog.load("2"), _inventory(2),
                      held=[replace(h, gpu_index=0) for h in held])
    assert [v.gpu_index for v in plan.vms[0].vgpus] == [1]


@pytest.mark.parametrize(("name", "lab", "expected"), [
    ("t", None, "t"), ("GPU lab / rack 3", None, "GPU-lab-rack-3"), ("..x..", None, "x"),
    ("GPU lab / rack 3", "team-b", "team-b")])
def test_the_lab_is_named_or_derived_from_the_inventory_name(
    name: str, lab: str | None, expected: str,
) -> None:
    data = {"name": name, **({"lab": lab} if lab else {})}
    assert Inventory.model_validate(data).lab_name == expected
