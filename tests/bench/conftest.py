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
