"""From a scenario to a checked Launch, with nothing started: GPU memory from the plan,
device fallbacks and unsupported models."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vgpu.errors import InputError
from vgpu.model import load_scenario
from vgpu.model.scenario import Scenario, TrainingWorkload
from vgpu.remote.local import LocalTransport
from vgpu.train.launch import TrainNode
from vgpu.train.scenario_runner import Overrides, planned_gpu_memory_bytes, prepare_launch

pytest.importorskip("torch", reason="the train extra (torch) is not installed")

SLICED = """\
id: train_slices
name: train-on-slices
gpu: A100-80GB
vms:
  - name: "slice-{n}"
    count: 2
    vgpus: ["1g.10gb"]
workloads:
  - name: resnet50-train
    kind: training
    model: resnet50
    nodes: 2
    batch_per_gpu: 1024
    precision: fp16
"""


def _scenario(tmp_path: Path, text: str) -> tuple[Scenario, TrainingWorkload]:
    path = tmp_path / "train_slices.yaml"
    path.write_text(text)
    scenario = load_scenario(path)
    workload = scenario.workloads[0]
    assert isinstance(workload, TrainingWorkload)
    return scenario, workload


def _gpu_nodes(tmp_path: Path, count: int) -> list[TrainNode]:
    return [TrainNode(name=f"slice-{i}", shell=LocalTransport(), address="127.0.0.1",
                      workdir=str(tmp_path / f"n{i}"), gpus=1) for i in range(count)]


def test_planned_framebuffer_is_the_smallest_slice(tmp_path: Path) -> None:
    scenario, _ = _scenario(tmp_path, SLICED)
    assert planned_gpu_memory_bytes(scenario) == 10 * 10**9


def test_study_batch_on_a_10gb_slice_is_refused_before_launch(tmp_path: Path) -> None:
    scenario, workload = _scenario(tmp_path, SLICED)
    with pytest.raises(InputError) as caught:
        prepare_launch(scenario, 0, workload, _gpu_nodes(tmp_path, 2), tmp_path,
                       Overrides(), [])
    text = str(caught.value)
    assert f"{tmp_path / 'train_slices.yaml'} workloads[0].batch_per_gpu" in text
    assert "batch 1024 of resnet50 at 224px fp16" in text and "use a batch of at most" in text
    assert not (tmp_path / "n0").exists()  # nothing was staged or started


def test_training_bert_is_refused_at_load_with_the_models_available(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"train_slices.yaml:11 workloads\[0\].model: no "
                       r"trainer for model 'bert'; training models: resnet50, resnet-tiny"):
        _scenario(tmp_path, SLICED.replace("model: resnet50", "model: bert"))


def test_a_model_override_no_trainer_has_is_refused(tmp_path: Path) -> None:
    scenario, workload = _scenario(tmp_path, SLICED)
    with pytest.raises(InputError, match=r"workloads\[0\].model: training model 'vgg16'"):
        prepare_launch(scenario, 0, workload, _gpu_nodes(tmp_path, 2), tmp_path,
                       Overrides(model="vgg16"), [])


@pytest.mark.slow
def test_cpu_nodes_fall_back_to_gloo_and_bf16_and_say_so(tmp_path: Path) -> None:
    scenario = load_scenario(Path(__file__).resolve().parents[2] / "scenarios"
                             / "train_multinode_2.yaml")
    workload = scenario.workloads[0]
    assert isinstance(workload, TrainingWorkload)
    nodes = [TrainNode(name=f"n{i}", shell=LocalTransport(), address="127.0.0.1",
                       workdir=str(tmp_path / f"n{i}"), python=sys.executable)
             for i in range(2)]
    notes: list[str] = []
    launch = prepare_launch(scenario, 0, workload, nodes, tmp_path,
                            Overrides(model="resnet-tiny", image_size=16, batch_per_gpu=4),
                            notes)
    assert launch.spec["backend"] == "gloo" and launch.spec["precision"] == "bf16"
    assert launch.spec["device"] == "cpu" and launch.spec["measured_steps"] == workload.cpu_steps
    assert "comm_backend nccl needs GPUs: gloo used on CPU" in notes
    assert "fp16 autocast needs a GPU: bf16 autocast used on CPU" in notes
    assert any("port_mapping" in note for note in notes)
    assert launch.comm_env == {}  # rdma/port mapping are NCCL settings
