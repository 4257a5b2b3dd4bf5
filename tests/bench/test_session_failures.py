"""Failures before any timed run: a harness that cannot start fails the probe round, the
bench reports it, and nothing half-done is stored."""

from __future__ import annotations

from pathlib import Path

from vgpu import catalog
from vgpu.bench.devices import cpu_device
from vgpu.bench.local import local_targets
from vgpu.bench.session import run_bench
from vgpu.bench.workload import BenchOverrides
from vgpu.results.store import ResultStore


def test_a_harness_that_cannot_start_fails_the_bench_without_storing_runs(
    tmp_path: Path,
) -> None:
    scenario = catalog.load("6")
    with ResultStore.open(tmp_path / "r.db") as store:
        targets, notes = local_targets(scenario, [cpu_device()], tmp_path / "work")
        broken = targets[1]
        broken.harness = "sh -c 'echo no such harness >&2; exit 3' --"
        outcome = run_bench(scenario, targets, notes, store, runs=1,
                            overrides=BenchOverrides(duration_s=1),
                            workload_names=["resnet50-offline"])
        assert outcome.failure is not None
        assert "calibration probe failed" in outcome.failure
        assert "instance s6-2g: harness exited with code 3" in outcome.failure
        assert "no such harness" in outcome.failure
        assert store.runs() == []
        assert store.integrity_check() == "ok"
    [workload] = outcome.workloads
    assert workload.series is None and workload.comparison is None
