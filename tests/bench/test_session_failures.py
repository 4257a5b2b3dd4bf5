"""Failures before any timed run: a harness that cannot start fails the probe round, the
bench reports it, and nothing half-done is stored."""

from __future__ import annotations

from pathlib import Path

from vgpu import catalog
from vgpu.bench.fanout import READY_LINE, RoundTimeouts, run_round
from vgpu.bench.session import run_bench
from vgpu.bench.workload import BenchOverrides
from vgpu.remote.local import LocalTransport
from vgpu.results.store.result_store import ResultStore
from vgpu.targets.devices import cpu_device
from vgpu.targets.local import local_targets
from vgpu.targets.target import Target


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


def test_a_record_of_the_wrong_shape_fails_its_instance_naming_the_field(
    tmp_path: Path,
) -> None:
    """The record is parsed where it arrives: a field of the wrong type is the instance's
    failure, said with the field's name, and nothing of it is kept as a result."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"status": "ok", "throughput": {"samples_per_second": "fast"}}')
    harness = f"sh -c 'echo {READY_LINE}; read go; cp {bad} \"$4/result.json\"' --"
    target = Target(instance="i1", transport=LocalTransport(), harness=harness,
                    work_root=str(tmp_path), device={"kind": "cpu"}, device_label="CPU",
                    target_kind="local")
    result = run_round([target], {"i1": {}}, {"i1": tmp_path / "i1"}, tag="t",
                       expected_s=1.0, timeouts=RoundTimeouts(ready_s=30.0, grace_s=30.0))
    [outcome] = result.outcomes
    assert result.failure is not None
    assert "instance i1: result.json does not match the harness's record: " \
        "throughput.samples_per_second: 'fast' is not a number" in result.failure
    assert outcome.record is None and outcome.result.throughput is None
