"""scripts/gpu_figures.py: gpu-check.sh's figures merged into gpu-check.json, and the
question whether the suite found a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts/gpu_figures.py"


def figures(path: Path, *args: str) -> int:
    return subprocess.run([sys.executable, str(SCRIPT), str(path), *args],
                          capture_output=True, text=True, timeout=60).returncode


def test_figures_are_merged_and_the_verdict_named(tmp_path: Path) -> None:
    target = tmp_path / "gpu-check.json"
    target.write_text(json.dumps({"gpu": {"name": "NVIDIA H200"}, "pytest_exit_status": 0}))
    overhead = tmp_path / "overhead.json"
    overhead.write_text(json.dumps({"workloads": {"r": {"ratio_of_medians": 0.99}}}))
    assert figures(target, "--has-gpu") == 0
    assert figures(target, "overhead", str(overhead), "main_job_exit", "4",
                   "main_job_seconds", "212") == 0
    document = json.loads(target.read_text())
    assert document["overhead"]["workloads"]["r"]["ratio_of_medians"] == 0.99
    assert (document["main_job_exit"], document["main_job_verdict"],
            document["main_job_seconds"]) == (4, "INCONCLUSIVE", 212)
    assert document["gpu"] == {"name": "NVIDIA H200"}


def test_no_gpu_and_bad_usage(tmp_path: Path) -> None:
    target = tmp_path / "gpu-check.json"
    target.write_text(json.dumps({"gpu": {"error": "gpu: no NVIDIA driver here"}}))
    assert figures(target, "--has-gpu") == 1
    assert figures(tmp_path / "missing.json", "--has-gpu") == 1
    assert figures(target, "lonely") == 2
