"""Every benchmark script starts: `--help` prints its usage (a broken import or argument
parser shows here, not when an engineer reaches for it), the pytest-driven ones collect
their checks, and the machine-noise script measures and describes a short run. No figure
is asserted: the figures are the benchmarks'."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in (REPO / "benchmarks").glob("*.py") if p.name != "__init__.py")
PYTEST_DRIVEN = {"llm_capacity_checks.py", "tour_check.py"}
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

pytestmark = pytest.mark.slow


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=timeout, check=False)


def test_there_are_benchmarks_to_start() -> None:
    assert len(SCRIPTS) >= 20 and (REPO / "benchmarks" / "machine_noise.py") in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_benchmark_starts(script: Path) -> None:
    if script.name in PYTEST_DRIVEN:
        done = _run("-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                    str(script))
        assert done.returncode == 0, done.stdout + done.stderr
        assert re.search(r"\b[1-9]\d* tests? collected", done.stdout), done.stdout
        return
    done = _run(str(script), "--help")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "usage:" in done.stdout.lower(), done.stdout


def test_machine_noise_measures_and_says_what_it_means() -> None:
    done = _run("benchmarks/machine_noise.py", "--windows", "3", "--window-s", "0.2",
                "--processes", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    for processes in (1, 2):
        assert re.search(rf"^{processes} process\(es\), rates summed: \d+ \d+ \d+$",
                         done.stdout, re.M), done.stdout
    assert len(re.findall(r"CV \d+\.\d%, largest step between windows \d+\.\d%",
                          done.stdout)) == 2, done.stdout
    assert len(re.findall(r"neighbouring windows differ by \d+\.\d% \(sd\), so a PASS of no "
                          r"difference at 2% needs about \d+ blocks", done.stdout)) == 2, \
        done.stdout
