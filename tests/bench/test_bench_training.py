"""`vgpu bench` of a training scenario launches the DDP training benchmark (torchrun) and
stores it like any other run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.conftest import RunVgpu
from vgpu.results.store.result_store import ResultStore

pytestmark = [pytest.mark.slow, pytest.mark.train]


def test_bench_runs_a_training_scenario_under_torchrun(run_vgpu: RunVgpu,
                                                       tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the train extra (torch) is not installed")
    run = run_vgpu("bench", "--scenario", "train_multinode_2", "--runs", "1", timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "resnet50-train" in run.stdout
    with ResultStore.open(tmp_path / "vgpu-results.db") as store:
        [stored] = store.runs()
        assert stored.scenario_id == "train_multinode_2" and stored.status == "ok"
