"""`vgpu mig ...` as separate processes sharing one simulated GPU through its state file,
the way an operator runs them. Skipped where a real NVIDIA driver exists: there the real
GPU would (rightly) be used instead of the simulator."""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vgpu.nvml.simulator import SimulatedGpuBackend

pytestmark = pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None,
                                reason="gpu: a real NVIDIA driver is present")


def vgpu(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from vgpu.cli import main; main()", *args],
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.fixture
def sim_env(tmp_path: Path) -> dict[str, str]:
    return {"VGPU_GPU_SIMULATOR": "A100-80GB",
            "VGPU_GPU_SIMULATOR_STATE": str(tmp_path / "simgpu.json"),
            "VGPU_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"}


def test_mig_disabled_without_enable_mig_exits_2_and_changes_nothing(
        tmp_path: Path, sim_env: dict[str, str]) -> None:
    SimulatedGpuBackend(["A100-80GB"], state_file=tmp_path / "simgpu.json")
    before = (tmp_path / "simgpu.json").read_bytes()

    run = vgpu(["mig", "apply", "--scenario", "bm6"], sim_env)

    assert run.returncode == 2, run.stderr
    assert "MIG mode is disabled on GPU 0" in run.stderr and "--enable-mig" in run.stderr
    assert "SIMULATED GPU" in run.stderr
    assert "Traceback" not in run.stderr
    assert (tmp_path / "simgpu.json").read_bytes() == before
    assert not (tmp_path / "state").exists()


@pytest.mark.slow
def test_bm8_apply_status_destroy_across_processes(
        tmp_path: Path, sim_env: dict[str, str]) -> None:
    SimulatedGpuBackend(["A100-80GB"], state_file=tmp_path / "simgpu.json", mig_enabled=True)

    applied = vgpu(["mig", "apply", "--scenario", "bm8", "--json"], sim_env)
    assert applied.returncode == 0, applied.stderr
    [result] = json.loads(applied.stdout)["results"]
    uuids = [d["uuid"] for d in result["mig_devices"]]
    assert len(set(uuids)) == 7 and all(u.startswith("MIG-") for u in uuids)
    assert (tmp_path / "state" / "mig-layout-0.json").exists()

    status = vgpu(["mig", "status", "--json"], sim_env)
    assert status.returncode == 0, status.stderr
    body = json.loads(status.stdout)
    assert body["simulated"] is True
    [gpu] = body["gpus"]
    assert gpu["mig_mode"] == {"current": True, "pending": True}
    assert sorted(d["uuid"] for d in gpu["mig_devices"]) == sorted(uuids)
    assert {i["profile"] for i in gpu["instances"]} == {"1g.10gb"}

    catalogue = vgpu(["mig", "verify-catalogue"], sim_env)
    assert catalogue.returncode == 0 and "matches NVML" in catalogue.stdout

    destroyed = vgpu(["mig", "destroy"], sim_env)
    assert destroyed.returncode == 0, destroyed.stderr
    assert destroyed.stdout.count("destroyed 1g.10gb@") == 7
    after = json.loads(vgpu(["mig", "status", "--json"], sim_env).stdout)
    assert after["gpus"][0]["instances"] == []


@pytest.mark.slow
def test_enable_mig_reset_and_restore_flow(tmp_path: Path, sim_env: dict[str, str]) -> None:
    SimulatedGpuBackend(["A100-80GB"], state_file=tmp_path / "simgpu.json")

    first = vgpu(["mig", "apply", "-s", "bm6", "--enable-mig"], sim_env)
    assert first.returncode == 1
    assert "WARNING: enabling MIG mode on GPU 0" in first.stderr
    assert "nvidia-smi --gpu-reset -i 0" in first.stderr

    assert vgpu(["mig", "simulated-reset"], sim_env).returncode == 0
    second = vgpu(["mig", "apply", "-s", "bm6"], sim_env)
    assert second.returncode == 0, second.stderr
    assert "verified: 3 MIG devices match the plan" in second.stdout

    restored = vgpu(["mig", "destroy", "--restore"], sim_env)
    assert restored.returncode == 0, restored.stderr
    assert "MIG mode on GPU 0 set back to disabled" in restored.stdout


def test_without_driver_or_simulator_the_error_is_clean(tmp_path: Path) -> None:
    env = {"VGPU_GPU_SIMULATOR": "", "VGPU_STATE_DIR": str(tmp_path)}
    run = vgpu(["mig", "status"], env)
    assert run.returncode == 1
    assert "no NVIDIA driver" in run.stderr and "VGPU_GPU_SIMULATOR=A100-80GB" in run.stderr
    assert "Traceback" not in run.stderr


def test_vsphere_scenario_is_refused_with_its_bare_metal_counterpart(
        sim_env: dict[str, str]) -> None:
    run = vgpu(["mig", "apply", "--scenario", "6"], sim_env)
    assert run.returncode == 2
    assert "--scenario bm6" in run.stderr
