"""The harness a guest gets matches its planned device: ONNX Runtime's GPU build where the
plan gives the VM (or bare-metal host) a GPU, the CPU build only where none is planned; in
the host venv (runtime host) and in the harness image (runtime container) alike."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from vgpu.model.inventory import Inventory
from vgpu.model.load import load_inventory, load_scenario
from vgpu.model.scenario import Scenario
from vgpu.planner import build_plan
from vgpu.provision.adapter import jobs_from_plan
from vgpu.provision.fanout import Job

ROOT = Path(__file__).resolve().parents[2]
ORT = importlib.metadata.version("onnxruntime")
NO_GPU_VM = ("id: nogpu\nname: nogpu\ngpu: A100-80GB\n"
             "vms: [{name: cpu-vm}, {name: gpu-vm, vgpus: [1g.10gb]}]\n"
             "workloads: [{model: resnet50}]\n")


def with_runtime(scenario: Scenario, runtime: str) -> Scenario:
    guest = scenario.guest.model_copy(update={"runtime": runtime})
    return scenario.model_copy(update={"guest": guest})


def plan_jobs(scenario: Scenario, tmp_path: Path, inventory: Inventory | None = None
              ) -> dict[str, Job]:
    inventory = inventory or load_inventory(ROOT / "inventory" / "sim.yaml")
    plan = build_plan(scenario, inventory)
    jobs = jobs_from_plan(plan, scenario, inventory, inventory_dir=tmp_path)
    return {job.target.name: job for job in jobs}


def venv_pins(scenario_file: Path, tmp_path: Path) -> dict[str, tuple[str, ...]]:
    scenario = with_runtime(load_scenario(scenario_file), "host")
    return {name: job.requirements.harness.requirements
            for name, job in plan_jobs(scenario, tmp_path).items()
            if job.requirements.harness is not None}


def no_gpu_scenario(tmp_path: Path) -> Path:
    path = tmp_path / "nogpu.yaml"
    path.write_text(NO_GPU_VM)
    return path


def test_mig_vms_get_the_gpu_build_of_onnxruntime(tmp_path: Path) -> None:
    found = venv_pins(ROOT / "scenarios" / "mig_4g_2g_1g.yaml", tmp_path)
    assert sorted(found) == ["s6-1g", "s6-2g", "s6-4g"]
    for pins in found.values():
        assert f"onnxruntime-gpu=={ORT}" in pins
        assert not any(p.startswith("onnxruntime==") for p in pins)
        assert any(p.startswith("mlcommons-loadgen==") for p in pins)


def test_a_vm_without_a_planned_gpu_gets_the_cpu_build(tmp_path: Path) -> None:
    found = venv_pins(no_gpu_scenario(tmp_path), tmp_path)
    assert f"onnxruntime=={ORT}" in found["cpu-vm"]
    assert f"onnxruntime-gpu=={ORT}" in found["gpu-vm"]


def test_container_guests_get_an_image_of_the_planned_build(tmp_path: Path) -> None:
    jobs = plan_jobs(load_scenario(no_gpu_scenario(tmp_path)), tmp_path)
    cpu, gpu = jobs["cpu-vm"].requirements, jobs["gpu-vm"].requirements
    assert cpu.image is not None and gpu.image is not None
    assert (cpu.image.ort_package, gpu.image.ort_package) == ("onnxruntime", "onnxruntime-gpu")
    assert cpu.harness is None and gpu.harness is None
    assert "gpu-probe" in gpu.steps and "gpu-probe" not in cpu.steps
    assert "harness-image" in cpu.steps and "node-harness" not in cpu.steps


def test_scenario_images_and_inventory_docker_reach_the_guests(tmp_path: Path) -> None:
    scenario = load_scenario(ROOT / "scenarios" / "mig_1x1g.yaml")
    guest = scenario.guest.model_copy(update={"base_image": "registry.lab/base:1",
                                              "harness_image": "registry.lab/harness:1"})
    inventory = load_inventory(ROOT / "inventory" / "sim.yaml")
    inventory = inventory.model_copy(update={"docker": inventory.docker.model_copy(
        update={"host": "unix:///run/lab-docker.sock", "binary": "/usr/bin/docker"})})
    [job] = plan_jobs(scenario.model_copy(update={"guest": guest}), tmp_path,
                      inventory).values()
    req = job.requirements
    assert req.image is not None
    assert (req.image.base_image, req.image.pull) == ("registry.lab/base:1",
                                                      "registry.lab/harness:1")
    assert req.docker.argv("ps") == ["/usr/bin/docker", "-H", "unix:///run/lab-docker.sock",
                                     "ps"]
