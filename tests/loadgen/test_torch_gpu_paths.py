"""Backend torch's arithmetic and transfer policy, checked with the CPU build of torch:
cuDNN's algorithm choice pinned (heuristics, not a per-process autotuner) and TF32 set
explicitly and recorded for CUDA, and the GPU suite's raw
loop moving data exactly as the harness does (it drives the backend itself)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from loadgen.runner import run
from loadgen.spec import parse_spec
from tests.loadgen.harness_helpers import ROOT, base_spec

torch = pytest.importorskip("torch", reason="the train extra (torch) is not installed")

from loadgen.backends.pytorch import (  # noqa: E402
    apply_math_policy,
    math_policy,
    to_device,
    transfer_discipline,
)

pytestmark = pytest.mark.train


@pytest.fixture
def restored_math() -> Iterator[None]:
    saved = (torch.backends.cudnn.benchmark, torch.get_float32_matmul_precision(),
             torch.backends.cudnn.allow_tf32)
    yield
    torch.backends.cudnn.benchmark = saved[0]
    torch.set_float32_matmul_precision(saved[1])
    torch.backends.cudnn.allow_tf32 = saved[2]


def test_cuda_runs_pin_cudnns_algorithms_and_set_tf32(restored_math: None) -> None:
    torch.backends.cudnn.benchmark = True  # an autotuner's pick may differ between runs
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False
    record = apply_math_policy(torch, math_policy("cuda"))
    assert record == {"cudnn_benchmark": False, "cudnn_algorithms": "heuristic", "tf32": True,
                      "float32_matmul_precision": "high", "cudnn_allow_tf32": True}
    assert torch.backends.cudnn.benchmark is False
    assert torch.backends.cudnn.deterministic is False
    assert torch.backends.cuda.matmul.allow_tf32 is True


def test_cpu_runs_have_neither(restored_math: None) -> None:
    assert math_policy("cpu") == {"cudnn_benchmark": False, "tf32": False}
    record = apply_math_policy(torch, math_policy("cpu"))
    assert record["float32_matmul_precision"] == "highest"
    assert record["cudnn_allow_tf32"] is False


def test_inputs_reach_the_device_unchanged() -> None:
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = to_device(torch, array, torch.device("cpu"))
    assert tensor.dtype == torch.float32 and tensor.tolist() == array.tolist()
    assert transfer_discipline("cuda") == "pinned, non-blocking, 2 batches in flight"


def test_raw_loop_moves_data_as_the_harness_does(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tests.gpu.rawloop", "measure", "resnet50",
                           "tiny", "fp32", "4", "0.5", "cpu"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=True)
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    assert raw["batches"] >= 1 and raw["samples_per_second"] > 0
    doc = base_spec(tmp_path / "models", backend={"name": "torch", "threads": 1})
    doc["loadgen"].update(min_duration_ms=300, target_qps=500)
    record = run(parse_spec(doc), tmp_path / "out")
    assert record["status"] == "ok", record["reason"]
    for key in ("transfer", "math", "in_flight", "execution_provider", "precision",
                "weight_seed", "channels_last"):
        assert raw["backend"][key] == record["backend"][key], key
    assert record["backend"]["math"] == {"cudnn_benchmark": False, "tf32": False}


def test_the_batch_probe_sweeps_sizes_and_chooses_one() -> None:
    done = subprocess.run([sys.executable, "-m", "tests.gpu.rawloop", "sweep", "bert", "tiny",
                           "fp32", "2,4", "0.3", "cpu"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=True)
    swept = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(swept["rates"]) == {"2", "4"} and swept["errors"] == {}
    assert all(rate > 0 for rate in swept["rates"].values())
    assert swept["chosen"] in (2, 4)
