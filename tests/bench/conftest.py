"""Runs the real `vgpu` command (and through it the real harness) in a scratch folder."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

VGPU = [sys.executable, "-m", "vgpu"]
RunVgpu = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def harness_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("harness-models")


def vgpu_env(cache: Path) -> dict[str, str]:
    return {**os.environ, "VGPU_HARNESS_CACHE": str(cache), "COLUMNS": "200"}


@pytest.fixture
def run_vgpu(tmp_path: Path, harness_cache: Path) -> RunVgpu:
    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*VGPU, *args], cwd=tmp_path, env=vgpu_env(harness_cache),
                              capture_output=True, text=True, timeout=timeout, check=False)

    return run


# a bench that ran and stored its series, whatever its verdict (a reference run has none
# to judge against: exit 5); 1 (could not run) and 2 (bad input) are not among them
RAN_AND_STORED = (0, 3, 4, 5)


def exit_of_json(stdout: str) -> int:
    """The exit code `vgpu bench --json` must end with, from its workloads' verdicts."""
    import json

    from vgpu.exitcodes import exit_for, overall_verdict

    return exit_for(overall_verdict(w["verdict"] for w in json.loads(stdout)["workloads"]))
