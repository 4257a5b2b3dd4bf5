"""Whole-GPU passthrough scenarios: a VM with several GPUs is one harness instance per
GPU (each addressed by its own UUID and, in a container, given only its own GPU), and the bare-metal
twin plans the same GPUs one instance each."""

from __future__ import annotations

from pathlib import Path

from vgpu import catalog
from vgpu.model.load import load_inventory
from vgpu.planner import build_plan
from vgpu.provision.facts import parse_gpu_list
from vgpu.remote.local import LocalTransport
from vgpu.results.store.records import Platform
from vgpu.targets.connect import _target
from vgpu.targets.containers import ContainerLaunch
from vgpu.targets.hostprobe import HostHarness
from vgpu.targets.local import planned_slices
from vgpu.targets.placements import HarnessPlacement, per_whole_gpu

ROOT = Path(__file__).resolve().parents[2]
FOUR_GPUS = "".join(f"GPU {k}: NVIDIA A100 80GB PCIe (UUID: GPU-000{k})\n" for k in range(4))


def test_four_gpu_vm_is_four_instances_each_on_its_own_gpu(tmp_path: Path) -> None:
    scenario = catalog.load("pt4")
    plan = build_plan(scenario, load_inventory(ROOT / "inventory" / "sim.yaml"))
    [vm] = plan.vms
    assert [v.kind for v in vm.vgpus] == ["passthrough"] * 4
    base = HarnessPlacement("pt4-vm", None, "passthrough+passthrough+passthrough+passthrough", "vm",
                     Platform(attachment="passthrough"))
    placements = per_whole_gpu(vm, base)
    assert [(p.instance, p.gpu_index, p.planned_slice) for p in placements] == [
        (f"pt4-vm-gpu{k}", k, "passthrough") for k in range(4)]
    host = HostHarness(LocalTransport(home=tmp_path), "python -m loadgen", str(tmp_path),
                       ["CUDAExecutionProvider", "CPUExecutionProvider"],
                       parse_gpu_list(FOUR_GPUS),
                       container=ContainerLaunch(image="vgpu-harness:1", session="s"))
    targets = [_target(p, host, [], allow_cpu=False) for p in placements]
    assert [t.device for t in targets] == [{"kind": "gpu", "uuid": f"GPU-000{k}"} for k in range(4)]
    assert [t.container.devices for t in targets if t.container] == [
        (f"GPU-000{k}",) for k in range(4)]
    assert targets[2].device_label == "GPU 2 (passthrough)"


def test_mig_backed_vm_stays_one_instance_on_gpu_0() -> None:
    plan = build_plan(catalog.load("6"), load_inventory(ROOT / "inventory" / "sim.yaml"))
    base = HarnessPlacement("s6-4g", None, "4g.40gb", "vm", Platform())
    assert [(p.instance, p.gpu_index) for p in per_whole_gpu(plan.vm("s6-4g"), base)] == [
        ("s6-4g", 0)]


def test_cpu_run_of_the_four_gpu_vm_keeps_one_instance_per_planned_gpu() -> None:
    assert planned_slices(catalog.load("pt4")) == [
        (f"pt4-vm-gpu{k}", "passthrough") for k in range(4)]
    assert planned_slices(catalog.load("bm_pt4")) == [
        (f"bm-pt4-gpu{k}", "passthrough") for k in range(1, 5)]


def test_bare_metal_twin_plans_the_same_four_whole_gpus() -> None:
    plan = build_plan(catalog.load("bm_pt4"))
    assert sorted(v.vgpus[0].gpu_index for v in plan.vms) == [0, 1, 2, 3]
    assert all(v.vgpus[0].kind == "passthrough" for v in plan.vms)
