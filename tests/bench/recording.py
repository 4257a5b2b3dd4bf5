"""One real recording of scenario 6 for the whole session (registered in tests/conftest.py):
`vgpu bench --scenario 6` on this machine (real harness, LoadGen, ONNX Runtime, tiny
resnet50, short runs) into a fresh folder, twice: first with no stored run of its twin
bm6 (the twin runs interleaved with it), then again, judged against the stored twin.
Tests read the recording as it is and copy its store before they add anything to it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.bench.conftest import VGPU, exit_of_json
from vgpu.results.store.result_store import ResultStore

# Half-second runs: the tests read what was stored and printed, not how fast or how steady
RECORDED = ["--workload", "resnet50-offline", "--runs", "2", "--duration", "0.5", "--json"]
STORE = "vgpu-results.db"


@dataclass(frozen=True)
class Scenario6Recording:
    folder: Path  # the store, its logs and the second bench's report (vgpu-report.html)
    cache: Path  # the harness models the benches built
    interleaved: subprocess.CompletedProcess[str]  # the first bench, twin interleaved
    again: subprocess.CompletedProcess[str]  # the second, against the stored twin

    @property
    def store(self) -> Path:
        return self.folder / STORE

    def workload(self, bench: subprocess.CompletedProcess[str]) -> dict[str, Any]:
        [workload] = json.loads(bench.stdout)["workloads"]
        return dict(workload)

    def vgpu(self, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
        """`vgpu ARGS` in ``folder`` with the recording's models and environment."""
        return run_vgpu(folder, self.cache, *args)

    def copy_store(self, folder: Path) -> Path:
        """The recorded store copied into ``folder`` (its runs' logs stay where they are)."""
        folder.mkdir(parents=True, exist_ok=True)
        for part in self.folder.glob(f"{STORE}*"):
            shutil.copy(part, folder / part.name)
        return folder / STORE


def run_vgpu(folder: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The session fixture runs before the tests' own environment is set (tests/conftest.py):
    it names no inventory and no user's store itself, and keeps its state in ``cache``."""
    env = {**os.environ, "VGPU_HARNESS_CACHE": str(cache), "VGPU_INVENTORY": "none",
           "VGPU_STATE_DIR": str(cache / "state"), "COLUMNS": "200"}
    env.pop("VGPU_DB", None)
    return subprocess.run([*VGPU, *args], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="session")
def scenario6_recording(tmp_path_factory: pytest.TempPathFactory) -> Scenario6Recording:
    """Scenario 6 benched twice into one fresh store (the module's docstring)."""
    folder = tmp_path_factory.mktemp("scenario6-recording")
    cache = tmp_path_factory.mktemp("harness-models")
    first = run_vgpu(folder, cache, "bench", "--scenario", "6", *RECORDED)
    assert first.returncode == exit_of_json(first.stdout), first.stderr
    again = run_vgpu(folder, cache, "bench", "--scenario", "6", *RECORDED)
    assert again.returncode == exit_of_json(again.stdout), again.stderr
    with ResultStore.open_existing(folder / STORE) as store:
        assert [r.scenario_id for r in store.runs()] == ["bm6", "6", "6", "bm6", "6", "6"]
    return Scenario6Recording(folder, cache, first, again)
