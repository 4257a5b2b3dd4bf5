"""Training over NCCL on the one bound GPU through `python -m loadgen train` (a world of
one: the trainer runs without torchrun and sets up its own process group), and NCCL's
allreduce through `python -m loadgen allreduce`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.gpu import figures
from tests.gpu.compare import run_module
from tests.gpu.gpuhost import GpuHost

pytestmark = pytest.mark.gpu

TRAIN_SPEC = {"schema_version": 1, "model": "resnet-tiny", "image_size": 32,
              "batch_size": 32, "precision": "fp16", "backend": "nccl", "device": "gpu",
              "warmup_steps": 3, "measured_steps": 20, "comm_probe_steps": 2,
              "instance_name": "gpu-check"}
ALLREDUCE_SPEC = {"schema_version": 1, "sizes_bytes": [1 << 20, 1 << 24], "iterations": 10,
                  "warmup_iterations": 3, "backend": "nccl", "device": "gpu",
                  "instance_name": "gpu-check"}


@pytest.fixture
def nccl(gpu_host: GpuHost, torch_cuda: dict[str, Any]) -> GpuHost:
    if not torch_cuda["nccl"]:
        pytest.skip(f"gpu: torch {torch_cuda['torch']} was built without NCCL")
    return gpu_host


def _run(host: GpuHost, command: str, spec: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / f"{command}.json"
    path.write_text(json.dumps(spec))
    out = tmp_path / command
    done = run_module(host, "loadgen", command, str(path), "--out", str(out))
    assert done.returncode == 0, done.stderr[-4000:]
    record: dict[str, Any] = json.loads((out / "result.json").read_text())
    assert record["status"] == "ok", record["reason"]
    assert (record["backend"], record["world_size"]) == ("nccl", 1)
    assert record["device"]["kind"] == "gpu"
    return record


def test_training_over_nccl_on_one_gpu(nccl: GpuHost, tmp_path: Path) -> None:
    record = _run(nccl, "train", TRAIN_SPEC, tmp_path)
    totals = record["totals"]
    assert totals["images_per_s"] > 0 and totals["params_in_sync"] is True
    figures.note("train_nccl", {"images_per_s": totals["images_per_s"],
                                "device": record["device"]["name"]})


def test_allreduce_over_nccl_on_one_gpu(nccl: GpuHost, tmp_path: Path) -> None:
    record = _run(nccl, "allreduce", ALLREDUCE_SPEC, tmp_path)
    assert [row["size_bytes"] for row in record["rows"]] == ALLREDUCE_SPEC["sizes_bytes"]
    figures.note("allreduce_nccl", record["rows"])
