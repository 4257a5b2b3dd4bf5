"""The harness a guest gets matches its planned device: ONNX Runtime's GPU build where the
plan gives the VM (or bare-metal host) a GPU, the CPU build only where none is planned."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from vgpu.model.load import load_inventory, load_scenario
from vgpu.plan import build_plan
from vgpu.provision.adapter import jobs_from_plan

ROOT = Path(__file__).resolve().parents[2]
ORT = importlib.metadata.version("onnxruntime")


def _requirements(scenario_file: str, tmp_path: Path) -> dict[str, tuple[str, ...]]:
    scenario = load_scenario(ROOT / "scenarios" / scenario_file)
    inventory = load_inventory(ROOT / "inventory" / "sim.yaml")
    plan = build_plan(scenario, inventory)
    jobs = jobs_from_plan(plan, scenario, inventory, inventory_dir=tmp_path)
    return {job.target.name: job.requirements.harness.requirements
            for job in jobs if job.requirements.harness is not None}


def test_mig_vms_get_the_gpu_build_of_onnxruntime(tmp_path: Path) -> None:
    found = _requirements("mig_4g_2g_1g.yaml", tmp_path)
    assert sorted(found) == ["s6-1g", "s6-2g", "s6-4g"]
    for pins in found.values():
        assert f"onnxruntime-gpu=={ORT}" in pins
        assert not any(p.startswith("onnxruntime==") for p in pins)
        assert any(p.startswith("mlcommons-loadgen==") for p in pins)


def test_a_vm_without_a_planned_gpu_gets_the_cpu_build(tmp_path: Path) -> None:
    scenario = tmp_path / "nogpu.yaml"
    scenario.write_text("id: nogpu\nname: nogpu\ngpu: A100-80GB\n"
                        "vms: [{name: cpu-vm}, {name: gpu-vm, vgpus: [1g.10gb]}]\n"
                        "workloads: [{model: resnet50}]\n")
    found = _requirements(str(scenario), tmp_path)
    assert f"onnxruntime=={ORT}" in found["cpu-vm"]
    assert f"onnxruntime-gpu=={ORT}" in found["gpu-vm"]
