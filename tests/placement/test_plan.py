"""build_plan: scenario + inventory (+ vGPUs held by other VMs) -> Plan. Placement of MIG,
time-sliced and passthrough vGPUs per host and GPU, VM settings, IP addresses, guest
steps, the bench matrix, notes, and the errors that name the file to fix."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.placement.lab_model import PLACEMENT, TWO_HOSTS, VCENTER, inventory, scenario
from vgpu.errors import PlanError
from vgpu.model.inventory import Inventory
from vgpu.model.load import load_inventory, load_scenario, vgpu_requests
from vgpu.model.plan import Plan, PlannedVM
from vgpu.model.scenario import Scenario
from vgpu.planner import HeldVgpu, build_plan, mmio_size_gb

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "inventory" / "sim.yaml"
def write_inventory(tmp_path: Path, **fields: Any) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump({"name": "lab", "vcenter": VCENTER, "placement": PLACEMENT,
                                    "hosts": TWO_HOSTS, **fields}))
    return path


def shipped(name: str, inventory_file: Path | None = SIM) -> Plan:
    loaded = load_inventory(inventory_file) if inventory_file else None
    return build_plan(load_scenario(ROOT / "scenarios" / f"{name}.yaml"), loaded,
                      inventory_name=str(inventory_file) if inventory_file else None)


def placement(vm: PlannedVM) -> list[tuple[str, str, int, int | None]]:
    return [(vm.host, v.label, v.gpu_index, v.start) for v in vm.vgpus]


def test_mig_tenants_share_the_first_gpu_of_the_first_host() -> None:
    plan = shipped("mig_3x2g_1g")
    assert [placement(vm) for vm in plan.vms] == [
        [("DC0_C0_H0", "2g.20gb", 0, 0)], [("DC0_C0_H0", "2g.20gb", 0, 2)],
        [("DC0_C0_H0", "2g.20gb", 0, 4)], [("DC0_C0_H0", "1g.10gb", 0, 6)]]
    assert [v.vgpu_type for vm in plan.vms for v in vm.vgpus] == ["A100D-2-20C"] * 3 + [
        "A100D-1-10C"]
    gpu = plan.gpus[0]
    assert (gpu.host, gpu.index, gpu.mode) == ("DC0_C0_H0", 0, "mig")
    assert [(s.owner, s.profile, s.start) for s in gpu.slices] == [
        ("s7-2g-1", "2g.20gb", 0), ("s7-2g-2", "2g.20gb", 2), ("s7-2g-3", "2g.20gb", 4),
        ("s7-1g", "1g.10gb", 6)]
    assert {g.mode for g in plan.gpus[1:]} == {"unused"}
    assert plan.hosts == ["DC0_C0_H0", "DC0_C0_H1", "DC0_C0_H2", "DC0_C0_H3"]
    assert (plan.inventory, plan.scenario_id, plan.platform) == (str(SIM), "7", "vsphere")


def test_mig_spills_to_the_next_gpu_with_its_pci_address() -> None:
    plan = build_plan(scenario([{"name": "a-{n}", "count": 8, "vgpus": ["1g.10gb"]}]),
                      inventory())
    assert [placement(vm)[0] for vm in plan.vms] == [
        *(("h1", "1g.10gb", 0, start) for start in range(7)), ("h1", "1g.10gb", 1, 0)]
    assert {v.pci_id for vm in plan.vms[:7] for v in vm.vgpus} == {"0000:17:00.0"}
    assert plan.vms[7].vgpus[0].pci_id == "0000:65:00.0"
    assert [g.tenants for g in plan.gpus] == [[f"a-{n}" for n in range(1, 8)], ["a-8"], []]


def test_all_vgpus_of_a_vm_are_on_one_gpu_host() -> None:
    plan = build_plan(scenario([{"name": "a-{n}", "count": 2, "vgpus": ["1g.10gb"] * 2}]),
                      inventory())
    assert [placement(vm) for vm in plan.vms] == [
        [("h1", "1g.10gb", 0, 0), ("h1", "1g.10gb", 0, 1)],
        [("h1", "1g.10gb", 0, 2), ("h1", "1g.10gb", 0, 3)]]


def test_pinned_and_spread_groups() -> None:
    pinned = build_plan(scenario([{"name": "p", "vgpus": ["1g.10gb"], "host": "h2"}]),
                        inventory())
    assert placement(pinned.vms[0]) == [("h2", "1g.10gb", 0, 0)]
    spread = shipped("train_multinode_4")
    assert [vm.host for vm in spread.vms] == ["DC0_C0_H0", "DC0_C0_H1", "DC0_C0_H2",
                                              "DC0_C0_H3"]
    assert [vm.vgpus[0].gpu_index for vm in spread.vms] == [0, 0, 0, 0]


def test_passthrough_vm_owns_whole_gpus() -> None:
    plan = shipped("passthrough_4gpu")
    vm = plan.vm("pt4-vm")
    assert [(v.kind, v.gpu_index, v.vgpu_type) for v in vm.vgpus] == [
        ("passthrough", i, None) for i in range(4)]
    host_gpus = [g for g in plan.gpus if g.host == "DC0_C0_H0"]
    assert [(g.mode, g.tenants) for g in host_gpus] == [("passthrough", ["pt4-vm"])] * 4
    assert vm.extra_config == {"pciPassthru.use64bitMMIO": "TRUE",
                               "pciPassthru.64bitMMIOSizeGB": "1024"}


def test_time_sliced_gpus_take_one_type_up_to_their_framebuffer() -> None:
    plan = build_plan(scenario([{"name": "t-{n}", "count": 5, "vgpus": ["A100D-20C"]},
                                {"name": "u", "vgpus": ["A100D-40C"]}]), inventory())
    assert [placement(vm)[0][:3] for vm in plan.vms] == [
        *[("h1", "A100D-20C", 0)] * 4, ("h1", "A100D-20C", 1), ("h2", "A100D-40C", 0)]
    assert [(g.mode, g.timesliced_type, len(g.tenants)) for g in plan.gpus] == [
        ("timesliced", "A100D-20C", 4), ("timesliced", "A100D-20C", 1),
        ("timesliced", "A100D-40C", 1)]
    assert plan.vm("t-1").vgpus[0].kind == "timesliced"


@pytest.mark.parametrize(("vgpus", "size"), [
    ([], 0), (["1g.10gb"], 64), (["3g.40gb"], 128), (["7g.80gb"], 256),
    (["1g.10gb", "1g.10gb"], 128), (["A100D-40C"], 128), (["passthrough"], 256),
    (["passthrough"] * 3, 1024),
])
def test_mmio_window_per_vm(vgpus: list[str], size: int) -> None:
    requests = vgpu_requests(scenario([{"name": "vm", "vgpus": vgpus}]))["vm"]
    assert mmio_size_gb(requests) == size


def test_vm_settings_become_extra_config() -> None:
    settings = {"p2p": True, "enable_uvm": True, "extra_config": {"numa.nodeAffinity": "0"},
                "ats": [{"name": "ats", "vm_extra_config": {"pciPassthru.ats": "1"}}]}
    plan = build_plan(scenario([{"name": "vm", "vgpus": ["1g.10gb", "1g.10gb"]}],
                               vm_settings=settings), inventory())
    assert plan.vm("vm").extra_config == {
        "pciPassthru.use64bitMMIO": "TRUE", "pciPassthru.64bitMMIOSizeGB": "128",
        "pciPassthru.allowP2P": "TRUE", "pciPassthru.RelaxACSforP2P": "TRUE",
        "pciPassthru0.cfg.enable_uvm": "1", "pciPassthru1.cfg.enable_uvm": "1",
        "pciPassthru.ats": "1", "numa.nodeAffinity": "0"}
    fixed = build_plan(scenario([{"name": "vm", "vgpus": ["7g.80gb"]}],
                                vm_settings={"mmio_size_gb": 512}), inventory())
    assert fixed.vm("vm").extra_config["pciPassthru.64bitMMIOSizeGB"] == "512"


def test_uvm_is_not_set_on_passthrough_gpus() -> None:
    plan = build_plan(scenario([{"name": "vm", "vgpus": ["passthrough"]}],
                               vm_settings={"enable_uvm": True}), inventory())
    assert not any("enable_uvm" in key for key in plan.vm("vm").extra_config)


def test_ips_come_from_static_then_the_pool_skipping_static_ones() -> None:
    network = {"static": {"vm-2": "10.0.0.1"},
               "ip_pool": {"start": "10.0.0.1", "end": "10.0.0.5"}}
    plan = build_plan(scenario([{"name": "vm-{n}", "count": 3, "vgpus": ["1g.10gb"]}]),
                      inventory(network=network))
    assert [vm.ip for vm in plan.vms] == ["10.0.0.2", "10.0.0.1", "10.0.0.3"]
    assert [vm.ip for vm in shipped("mig_3x2g_1g").vms] == [
        "127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14"]
    no_pool = build_plan(scenario([{"name": "vm", "vgpus": ["1g.10gb"]}]), inventory())
    assert no_pool.vm("vm").ip is None


def test_too_few_pool_addresses_name_the_inventory_file(tmp_path: Path) -> None:
    path = write_inventory(tmp_path, network={"static": {"vm-1": "10.0.0.2"},
                                              "ip_pool": {"start": "10.0.0.1",
                                                          "end": "10.0.0.3"}})
    fits = scenario([{"name": "vm-{n}", "count": 3, "vgpus": ["1g.10gb"]}])
    assert len(build_plan(fits, load_inventory(path), inventory_name=str(path)).vms) == 3
    with pytest.raises(PlanError) as error:
        build_plan(scenario([{"name": "vm-{n}", "count": 5, "vgpus": ["1g.10gb"]}]),
                   load_inventory(path), inventory_name=str(path))
    (problem,) = error.value.problems
    assert (problem.file, problem.field) == (str(path), "network.ip_pool")
    assert problem.message == "the pool has too few addresses for vm-4, vm-5"
    assert problem.fix == "widen ip_pool or add static addresses"


CONTAINER_STEPS = ["os-facts", "base-packages", "container-runtime:docker", "nvidia-driver",
                   "nvidia-container-toolkit", "vgpu-licensing", "harness-image", "verify-gpu",
                   "gpu-probe"]


def test_guest_steps_of_a_container_guest() -> None:
    assert shipped("mig_3x2g_1g").guest_steps == CONTAINER_STEPS
    assert shipped("train_multinode_4").guest_steps == [
        "os-facts", "base-packages", "container-runtime:docker", "nvidia-driver",
        "nvidia-container-toolkit", "passwordless-ssh", "harness-image", "verify-gpu",
        "gpu-probe"]


@pytest.mark.parametrize(("guest", "steps"), [
    ({"runtime": "host"}, ["os-facts", "base-packages", "container-runtime:docker",
                           "nvidia-driver", "nvidia-container-toolkit", "vgpu-licensing",
                           "node-harness", "verify-gpu"]),
    ({"container_runtime": "apptainer", "base_packages": []},
     ["os-facts", "container-runtime:apptainer", "nvidia-driver", "vgpu-licensing",
      "node-harness", "verify-gpu"]),
    ({"container_runtime": "none", "licensing": False},
     ["os-facts", "base-packages", "nvidia-driver", "node-harness", "verify-gpu"]),
    ({"driver": "none"}, ["os-facts", "base-packages", "container-runtime:docker",
                          "harness-image", "verify-gpu"]),
])
def test_guest_steps_follow_the_guest_stack(guest: dict[str, Any], steps: list[str]) -> None:
    plan = build_plan(scenario([{"name": "vm", "vgpus": ["1g.10gb"]}], guest=guest),
                      inventory())
    assert plan.guest_steps == steps


def test_bare_metal_plans_hosts_not_vms() -> None:
    lab = Inventory.model_validate({"name": "bm", "bare_metal": [
        {"name": "gpu1", "address": "10.1.1.1", "gpus": [{"model": "A100-80GB"}]},
        {"name": "me", "address": "local"}],
        "network": {"ip_pool": {"start": "10.0.0.1", "end": "10.0.0.1"}}})
    plan = build_plan(scenario([{"name": "b-{n}", "count": 2, "vgpus": ["3g.40gb"]}],
                               platform="bare-metal", guest={"driver": "vgpu-guest"}), lab)
    assert plan.hosts == ["gpu1", "me"]
    assert [placement(vm) for vm in plan.vms] == [[("gpu1", "3g.40gb", 0, 0)],
                                                   [("gpu1", "3g.40gb", 0, 4)]]
    assert [(vm.ip, vm.extra_config) for vm in plan.vms] == [(None, {}), (None, {})]
    assert "vgpu-licensing" not in plan.guest_steps
    assert plan.notes == ["me: this machine lists no GPUs in the inventory; planning 1 x "
                          "A100-80GB (bench reads the real devices from NVML)"]


def test_bare_metal_without_inventory_assumes_one_host() -> None:
    plan = shipped("bm_mig_7x1g", inventory_file=None)
    assert (plan.hosts, plan.inventory) == (["host-1"], None)
    assert [placement(vm)[0] for vm in plan.vms] == [
        ("host-1", "1g.10gb", 0, start) for start in range(7)]
    assert plan.notes[0] == "no inventory: assuming one host with 1 x A100-80GB"
    assert plan.notes[1].startswith("memory estimate llm-server: weights 0.16 M params")
    assert len(plan.notes) == 2
    assert plan.guest_steps == [s for s in CONTAINER_STEPS if s != "vgpu-licensing"]


def test_spread_without_inventory_assumes_a_host_per_vm() -> None:
    plan = shipped("train_multinode_2", inventory_file=None)
    assert plan.hosts == ["host-1", "host-2"]
    assert [vm.host for vm in plan.vms] == ["host-1", "host-2"]
    assert plan.notes == ["no inventory: assuming 2 hosts with 1 x A100-80GB each"]


def test_assumed_mig_placements_are_noted() -> None:
    plan = build_plan(scenario([{"name": "vm", "vgpus": ["1g.18gb"]}], gpu="H200-141GB"))
    assert plan.notes[0] == ("H200-141GB: MIG placements assumed equal to H100's (no "
                             "published capture); check with `vgpu mig verify-catalogue` on "
                             "the host")
    assert plan.vm("vm").vgpus[0].vgpu_type == "H200-1-18C"
    assert not any("assumed" in note for note in shipped("mig_3x2g_1g").notes)


def test_held_mig_instances_of_other_vms_are_placed_around() -> None:
    held = [HeldVgpu("h1", 0, "other-vm", "mig", "4g.40gb")]
    plan = build_plan(scenario([{"name": "vm", "vgpus": ["3g.40gb"]}]), inventory(),
                      held=held)
    assert placement(plan.vm("vm")) == [("h1", "3g.40gb", 0, 4)]
    assert [(s.owner, s.profile, s.start, s.foreign) for s in plan.gpus[0].slices] == [
        ("held by other-vm", "4g.40gb", 0, True), ("vm", "3g.40gb", 4, False)]
    assert plan.gpus[0].tenants == ["vm"]


def test_held_whole_and_time_sliced_gpus_are_avoided() -> None:
    held = [HeldVgpu("h1", 0, "o1", "passthrough", "passthrough"),
            HeldVgpu("h1", 1, "o2", "timesliced", "A100D-40C")]

    def host_of(vgpu: str) -> tuple[str, str, int, int | None]:
        plan = build_plan(scenario([{"name": "vm", "vgpus": [vgpu]}]), inventory(), held=held)
        return placement(plan.vm("vm"))[0]

    assert host_of("passthrough") == ("h2", "passthrough", 0, None)
    # A GPU only other VMs use shows what they hold it as, not as a MIG GPU.
    plan = build_plan(scenario([{"name": "vm", "vgpus": ["passthrough"]}]), inventory(),
                      held=held)
    modes = {(g.host, g.index): g.mode for g in plan.gpus}
    assert modes[("h1", 0)] == "passthrough" and modes[("h1", 1)] == "timesliced"
    assert host_of("A100D-20C") == ("h2", "A100D-20C", 0, None)
    assert host_of("A100D-40C") == ("h1", "A100D-40C", 1, None)
    with pytest.raises(PlanError) as error:
        build_plan(scenario([{"name": "p", "vgpus": ["passthrough"]},
                             {"name": "t", "vgpus": ["A100D-20C"]}]), inventory(), held=held)
    assert str(error.value) == (
        "scenario t vms: no room for VM t (A100D-20C) on 2 host(s); already held by other "
        "VMs: o1 (passthrough on h1 GPU 0), o2 (A100D-40C on h1 GPU 1) (fix: free GPUs, add "
        "hosts to the inventory, or pick smaller profiles)")


def test_no_host_with_the_gpu_names_the_inventory_file(tmp_path: Path) -> None:
    path = write_inventory(tmp_path)
    with pytest.raises(PlanError) as error:
        build_plan(scenario([{"name": "vm", "vgpus": ["1g.10gb"]}], gpu="H100-80GB"),
                   load_inventory(path), inventory_name=str(path))
    (problem,) = error.value.problems
    assert (problem.file, problem.field) == (str(path), "hosts")
    assert problem.message == "no host has a H100-80GB GPU"
    assert problem.fix == "add a host with gpus: [{model: H100-80GB}]"
    with pytest.raises(PlanError) as bare:
        build_plan(scenario([{"name": "vm", "vgpus": ["1g.10gb"]}], platform="bare-metal"),
                   load_inventory(path), inventory_name=str(path))
    assert bare.value.problems[0].field == "bare_metal"


def test_no_room_names_the_scenario_file_and_the_nearest_valid_layout(
        tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump({
        "id": "big", "name": "big", "gpu": "A100-80GB", "workloads": [{"model": "resnet50"}],
        "vms": [{"name": "vm-{n}", "count": 3, "vgpus": ["4g.40gb"], "host": "h1"}]}))
    with pytest.raises(PlanError) as error:
        build_plan(load_scenario(path), inventory())
    (problem,) = error.value.problems
    assert (problem.file, problem.field) == (str(path), "vms")
    assert problem.message.startswith("no room for VM vm-3 (4g.40gb) on host h1; on h1: ")
    assert "nearest valid: shrink 4g.40gb to 3g.40gb" in problem.message


def test_every_vm_that_does_not_fit_is_reported() -> None:
    with pytest.raises(PlanError) as error:
        build_plan(scenario([{"name": "p-{n}", "count": 5, "vgpus": ["passthrough"],
                              "spread": True}]), inventory())
    assert [p.message for p in error.value.problems] == [
        f"no room for VM p-{n} (passthrough) on 2 host(s); the group is spread one VM per "
        "host" for n in (3, 4, 5)]


def test_bench_matrix_and_plan_identity() -> None:
    plan = build_plan(scenario([{"name": "n-{n}", "count": 3, "vgpus": ["passthrough"]}],
                               workloads=[{"kind": "training", "nodes": 2},
                                          {"model": "resnet50"}], repeats=5), inventory())
    assert [(b.workload, b.kind, b.instances, b.repeats) for b in plan.bench] == [
        ("train-resnet50-2n", "training", ["n-1", "n-2"], 5),
        ("resnet50-offline", "inference", ["n-1", "n-2", "n-3"], 5)]
    assert (plan.inventory, plan.scenario_file) == ("lab", None)
    assert plan.plan_hash == plan.compute_hash()
    again = build_plan(scenario([{"name": "n-{n}", "count": 3, "vgpus": ["passthrough"]}],
                                workloads=[{"kind": "training", "nodes": 2},
                                           {"model": "resnet50"}], repeats=5), inventory())
    assert again.model_dump() == plan.model_dump()


def test_inventory_problems_name_the_file_it_was_loaded_from(tmp_path: Path) -> None:
    path = write_inventory(tmp_path, network={"ip_pool": {"start": "10.0.0.1",
                                                          "end": "10.0.0.1"}})
    loaded = load_inventory(path)
    assert (loaded.source, inventory().source) == (str(path), None)
    with pytest.raises(PlanError) as pool:
        build_plan(scenario([{"name": "vm-{n}", "count": 2, "vgpus": ["1g.10gb"]}]), loaded)
    with pytest.raises(PlanError) as gpu:
        build_plan(scenario([{"name": "vm", "vgpus": ["1g.10gb"]}], gpu="A30"), loaded)
    assert [pool.value.problems[0].file, gpu.value.problems[0].file] == [str(path)] * 2
    with pytest.raises(PlanError) as unnamed:
        build_plan(scenario([{"name": "vm", "vgpus": ["1g.10gb"]}], gpu="A30"), inventory())
    assert unnamed.value.problems[0].file == "inventory"


def _cluster(hosts: int) -> Inventory:
    return Inventory.model_validate({
        "name": "cluster", "vcenter": {"host": "vc", "user": "u", "password": {"env": "P"}},
        "placement": {"datacenter": "DC", "cluster": "C", "datastore": "DS",
                      "network": "VM Network", "template": "tpl"},
        "hosts": [{"name": f"esx{k:02d}", "gpus": [{"model": "A100-80GB", "count": 4}]}
                  for k in range(hosts)]})


def _mig_vms(count: int) -> Scenario:
    groups = [{"name": f"g{g}-{{n}}", "count": min(64, count - 64 * g),
               "vgpus": ["nvidia-1-10c"]} for g in range(-(-count // 64))]
    return Scenario.model_validate({
        "id": "scale", "name": "scale", "platform": "vsphere", "gpu": "A100-80GB",
        "vms": groups, "workloads": [{"name": "r", "model": "resnet50", "scenario": "Offline"}]})


def test_a_whole_cluster_of_mig_vms_is_planned_and_one_more_names_the_full_hosts() -> None:
    plan = build_plan(_mig_vms(16 * 28), _cluster(16), inventory_name="lab.yaml")
    assert set(Counter(vm.host for vm in plan.vms).values()) == {28}
    slots = Counter((vm.host, v.gpu_index, v.start) for vm in plan.vms for v in vm.vgpus)
    assert len(slots) == 16 * 4 * 7 and set(slots.values()) == {1}
    with pytest.raises(PlanError) as raised:
        build_plan(_mig_vms(16 * 28 + 1), _cluster(16), inventory_name="lab.yaml")
    message = str(raised.value)
    assert "no room left on 16 of 16 host(s) (esx00, esx01, esx02, esx03, ... esx15)" in message
    assert "nearest valid: drop 1g.10gb (28 x 1g.10gb)" in message
