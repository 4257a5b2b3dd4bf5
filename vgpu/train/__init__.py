"""Training benchmarks: launch torchrun across nodes, store results, scaling reports.

`vgpu train run` and `vgpu bench` of a training scenario call
``session.run_training_bench``; ``run_training_scenario`` runs and stores one repeat of the
scenario's training workloads (``targets=None``: on this machine); ``nodes_from_targets``
turns bench targets (one per GPU/VM) into training nodes (one per host)."""

from __future__ import annotations

from vgpu.train.launch import TrainNode
from vgpu.train.scenario_runner import Overrides, TrainingRun, local_node, run_training_scenario
from vgpu.train.targets import nodes_from_targets

__all__ = [
    "Overrides",
    "TrainNode",
    "TrainingRun",
    "local_node",
    "nodes_from_targets",
    "run_training_scenario",
]
