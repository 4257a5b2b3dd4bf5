"""The MLCommons submission checker itself on vgpu's export of real LoadGen runs.

The checker is not a package: set VGPU_MLPERF_CHECKER to a tools/submission folder of
mlcommons/inference (the one holding submission_checker/). Its exit code says nothing (0
on an empty tree too): these tests read its summary lines."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.results.mlperf_benches import SUBMITTER, bench_resnet_with_accuracy, run_vgpu

CHECKER_ENV = "VGPU_MLPERF_CHECKER"
VERSION = "v6.1"  # LoadGen 6.0.17 writes the v6.1 seeds
FULL_DATASET = 50000

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not os.environ.get(CHECKER_ENV),
    reason=f"external: {CHECKER_ENV} is not set: point it at a tools/submission folder of "
           "mlcommons/inference (the checker is not installed with vgpu)")]


def _checker(tree: Path, tmp_path: Path) -> str:
    folder = Path(os.environ[CHECKER_ENV])
    assert (folder / "submission_checker" / "main.py").is_file(), \
        f"{CHECKER_ENV}={folder} has no submission_checker/main.py"
    done = subprocess.run([sys.executable, "-m", "submission_checker.main", "--input",
                           str(tree), "--version", VERSION, "--csv",
                           str(tmp_path / "summary.csv")], cwd=folder, capture_output=True,
                          text=True, timeout=600, check=False)
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    return output


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if " ERROR]" in line or
            line.startswith("ERROR:")]


def _export(folder: Path, cache: Path, out: Path) -> str:
    done = run_vgpu(folder, cache, "results", "--export", "mlperf", str(out), "--submitter",
                    SUBMITTER)
    assert done.returncode == 0, done.stdout + done.stderr
    return " ".join(done.stdout.split())


def test_the_checker_reports_a_tiny_cpu_run_for_the_reasons_vgpu_gives(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    bench_resnet_with_accuracy(tmp_path, cache, "--runs", "1", "--duration", "1",
                               "--no-baseline", "--no-report")
    said = _export(tmp_path, cache, tmp_path / "tree")
    assert "not submittable: duration: min_duration was 1000 ms" in said
    assert "not submittable: accuracy: the accuracy pass covered 256 samples" in said
    output = _checker(tmp_path / "tree", tmp_path)
    assert "Results=0, NoResults=1" in output
    errors = " ".join(_errors(output))
    assert "Test duration less than 600s in user config. expected=600000, found=1000" in errors
    assert f"accuracy samples: 256, dataset size: {FULL_DATASET}" in errors
    # nothing about the tree, the system description or the files per result
    assert not re.search(r"missing|is empty|has submitter|has division|invalid", errors)


@pytest.mark.timeout(2400)
def test_the_checker_accepts_the_export_of_a_run_meeting_the_rules_minimums(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    bench_resnet_with_accuracy(tmp_path, cache, "--runs", "1", "--no-baseline",
                               "--no-report", samples=FULL_DATASET, scenario="SingleStream",
                               timeout=2000)
    said = _export(tmp_path, cache, tmp_path / "tree")
    assert "not submittable" not in said and "submittable as far as vgpu checks" in said
    output = _checker(tmp_path / "tree", tmp_path)
    assert _errors(output) == []
    found = re.search(r"Results=(\d+), NoResults=(\d+)", output)
    assert found and int(found.group(1)) >= 1 and found.group(2) == "0", output
    assert "Open Results=1" in output
    assert "SUMMARY: submission looks OK" in output
