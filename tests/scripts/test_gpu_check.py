"""scripts/gpu-check.sh in a replica of the lent GPU machine's layout, on this machine:
the host's python3 is itself a venv (/opt/torch/.venv) holding torch, numpy, onnx,
onnxruntime, pytest, typer, rich, pyyaml and nvidia-ml-py, and nothing else comes from an
index but the wheels of scripts/gpu-wheels.sh. The run must reach pytest, and with no GPU
here every GPU test must skip for a 'gpu:' reason."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CARRY_LIMIT = 64 * 1024 * 1024
SKIPPED = re.compile(r"^SKIPPED \[(\d+)\] tests/gpu/\S+: (.*)$", re.MULTILINE)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def replica(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("gpu-host")
    built = subprocess.run(
        [sys.executable, str(ROOT / "scripts/gpu-replica.py"), str(base),
         "--from", sysconfig.get_paths()["purelib"]],
        capture_output=True, text=True, check=True)
    python = Path(built.stdout.strip())
    wheels = base / "whl"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    subprocess.run(["bash", str(ROOT / "scripts/gpu-wheels.sh"), str(wheels)], check=True,
                   env={**os.environ, "VGPU_WHEELS_PYTHON": version,
                        "PYTHON": sys.executable},
                   capture_output=True, text=True)
    return {"base": base, "python": python, "wheels": wheels}


def _gpu_check(replica: dict[str, Path], require_gpu: str,
               *flags: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "VGPU_REQUIRE_GPU")}
    env.update(PYTHON=str(replica["python"]), VGPU_REQUIRE_GPU=require_gpu,
               VGPU_GPU_VENV=str(replica["base"] / f"venv-gpu-{require_gpu}"),
               OUT=str(replica["base"] / f"out-{require_gpu}"))
    return subprocess.run(["bash", "scripts/gpu-check.sh", *flags, str(replica["wheels"])],
                          cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)


def test_replica_holds_what_the_device_has_and_not_the_wheels(
        replica: dict[str, Path]) -> None:
    probe = ("import importlib.util as u; print([m for m in ('torch', 'numpy', 'onnx', "
             "'onnxruntime', 'pytest', 'typer', 'rich', 'yaml', 'pynvml', 'pydantic', "
             "'paramiko', 'mlperf_loadgen') if u.find_spec(m)])")
    done = subprocess.run([str(replica["python"]), "-c", probe], capture_output=True,
                          text=True, check=True, env={"PATH": os.environ["PATH"]})
    assert done.stdout.strip() == str(["torch", "numpy", "onnx", "onnxruntime", "pytest",
                                       "typer", "rich", "yaml", "pynvml"])


def test_every_gpu_test_skips_for_a_gpu_reason(replica: dict[str, Path]) -> None:
    done = _gpu_check(replica, "0", "--no-ort-gpu")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    skipped = SKIPPED.findall(done.stdout)
    assert all(reason.startswith("gpu:") for _, reason in skipped), skipped
    summary = re.search(r"= (\d+) skipped in ", done.stdout)
    assert summary, done.stdout[-500:]
    assert sum(int(count) for count, _ in skipped) == int(summary.group(1)) >= 10
    assert not re.search(r"\d+ (passed|failed|error)", done.stdout)
    figures = json.loads((replica["base"] / "out-0/gpu-check.json").read_text())
    assert figures["gpu"]["error"].startswith("gpu: no NVIDIA driver here")
    assert figures["pytest_exit_status"] == 0


def test_on_the_gpu_host_a_gpu_skip_is_a_failure(replica: dict[str, Path]) -> None:
    done = _gpu_check(replica, "1")
    assert done.returncode == 1
    assert "required GPU missing (VGPU_REQUIRE_GPU=1): gpu:" in done.stdout


def test_what_travels_fits_one_call(replica: dict[str, Path]) -> None:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout.split(b"\0")
    repo = sum((ROOT / os.fsdecode(name)).stat().st_size for name in tracked
               if name and (ROOT / os.fsdecode(name)).is_file())
    wheels = sum(path.stat().st_size for path in replica["wheels"].iterdir())
    assert repo + wheels < CARRY_LIMIT, f"repo {repo} + wheels {wheels} bytes"
