"""Bare-metal scenario bm6 on this machine with the GPU simulator: `vgpu apply` cuts the
simulated A100 into 4g.40gb + 2g.20gb + 1g.10gb through the NVML layer (never enabling MIG
implicitly), then `vgpu bench --inventory inventory/local.yaml` runs one harness instance per
MIG device with CUDA_VISIBLE_DEVICES set to that device's UUID, the CPU doing the work and
every record saying so."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.conftest import RAN_AND_STORED

ROOT = Path(__file__).resolve().parents[2]


def vgpu(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vgpu", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=600)


@pytest.mark.slow
def test_bm6_layout_applied_then_benched_per_mig_device(tmp_path: Path) -> None:
    gpu_state = tmp_path / "gpu.json"
    env = {**os.environ, "VGPU_GPU_SIMULATOR": "A100-80GB",
           "VGPU_GPU_SIMULATOR_STATE": str(gpu_state),
           "VGPU_STATE_DIR": str(tmp_path / "layouts"), "COLUMNS": "200"}

    refused = vgpu(["apply", "--scenario", "bm6"], env, tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "MIG mode is disabled on GPU 0" in refused.stderr
    before = gpu_state.read_text() if gpu_state.exists() else None

    pending = vgpu(["apply", "--scenario", "bm6", "--enable-mig"], env, tmp_path)
    assert pending.returncode == 1 and "gpu-reset" in pending.stderr
    assert gpu_state.read_text() != before  # MIG mode now pending, nothing else
    assert vgpu(["mig", "simulated-reset"], env, tmp_path).returncode == 0

    applied = vgpu(["apply", "--scenario", "bm6"], env, tmp_path)
    assert applied.returncode == 0, applied.stderr
    uuids = dict(re.findall(r"(bm6-\dg): \d+g\.\d+gb@\d -> (MIG-[0-9a-f-]+)", applied.stdout))
    assert sorted(uuids) == ["bm6-1g", "bm6-2g", "bm6-4g"]
    assert "4g.40gb@0" in applied.stdout and "2g.20gb@4" in applied.stdout
    assert "1g.10gb@6" in applied.stdout

    bench = vgpu(["bench", "--scenario", "bm6", "--inventory", str(ROOT / "inventory" /
                                                                   "local.yaml"),
                  "--runs", "1", "--duration", "1", "--workload", "resnet50-offline",
                  "--db", str(tmp_path / "results.db"), "--no-report"], env, tmp_path)
    assert bench.returncode in RAN_AND_STORED, bench.stdout + bench.stderr
    assert "the CPU does the work" in bench.stdout
    records = {p.parent.name: json.loads(p.read_text())
               for p in tmp_path.rglob("result.json") if "probe" not in str(p)}
    assert sorted(records) == ["bm6-1g", "bm6-2g", "bm6-4g"]
    for instance, record in records.items():
        device = record["device"]
        assert device["cuda_visible_devices"] == uuids[instance]
        assert device["execution_provider"] == "CPUExecutionProvider"
        assert device["note"] == "CPU: no GPU/MIG slice used"
