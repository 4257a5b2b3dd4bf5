"""Real LoadGen runs through the bench's storage: an INVALID Server repeat among VALID ones
is left out of the statistics and listed with LoadGen's reason, and the verdict is
INCONCLUSIVE; a bench repeat stores its warm-up windows and its timed overlap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loadgen.runner import run
from loadgen.spec import parse_spec
from tests.loadgen.harness_helpers import base_spec
from tests.results.series import Repeat, record_series
from vgpu import catalog
from vgpu.bench.overlap import COMMON_WINDOW_THROUGHPUT
from vgpu.bench.session import run_bench
from vgpu.bench.workload import BenchOverrides
from vgpu.results.store.records import InstanceResult, TargetKind
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SYSTEM_THROUGHPUT, TIMED_OVERLAP, load_series
from vgpu.results.verdict.judge import compare_series
from vgpu.targets.devices import cpu_device
from vgpu.targets.local import local_targets

IMPOSSIBLE_MS = 0.001


def _server_run(cache: Path, out: Path, latency_ms: float) -> dict[str, Any]:
    doc = base_spec(cache)
    doc["loadgen"] = {"scenario": "Server", "min_duration_ms": 1000, "min_query_count": 8,
                      "performance_sample_count": 32, "target_qps": 600,
                      "target_latency_ms": latency_ms}
    return run(parse_spec(doc, "spec.json", out.parent), out)


def _store(store: ResultStore, records: list[dict[str, Any]], kind: TargetKind) -> str:
    runs = [Repeat([InstanceResult(
        name="a", status="ok", device_kind="cpu", validity=record["validity"]["result"],
        validity_reasons=record["validity"]["reasons"],
        throughput=record["throughput"]["samples_per_second"],
        latency_ns={"p99": float(record["latency_ns"]["p99"])})]) for record in records]
    return record_series(store, runs, workload="resnet50-server", target_kind=kind,
                         workload_detail={"loadgen_scenario": "Server",
                                          "repeats": len(records)}).series_id


@pytest.mark.slow
def test_an_invalid_server_repeat_makes_the_verdict_inconclusive(
    harness_cache: Path, tmp_path: Path,
) -> None:
    records = [_server_run(harness_cache, tmp_path / name, latency)
               for name, latency in (("r0", 200.0), ("r1", IMPOSSIBLE_MS), ("r2", 200.0))]
    assert [r["validity"]["result"] for r in records] == ["VALID", "INVALID", "VALID"]
    with ResultStore.open(tmp_path / "r.db") as store:
        vm = load_series(store, _store(store, records, "vm"))
        bare_metal = load_series(store, _store(store, [records[0], records[2]] * 2,
                                               "bare-metal"))
        comparison = compare_series("vm-vs-bare-metal", vm, bare_metal, tolerance=0.5)
    [invalid] = vm.invalid_runs
    assert invalid.run_id == vm.runs[1].id and invalid.instance == "a"
    assert "Reduce target QPS to improve latency." in invalid.reasons
    assert vm.samples[SYSTEM_THROUGHPUT].values == pytest.approx(
        [records[0]["throughput"]["samples_per_second"],
         records[2]["throughput"]["samples_per_second"]])
    assert comparison.verdict == "INCONCLUSIVE"
    assert comparison.shortfalls == [
        f"{vm.label}: 2 valid of 3 repeats, at least 3 needed (INVALID: run {invalid.run_id})"]


@pytest.mark.slow
def test_a_bench_repeat_stores_warmup_windows_and_overlap(tmp_path: Path) -> None:
    scenario = catalog.load("6")
    with ResultStore.open(tmp_path / "r.db") as store:
        targets, notes = local_targets(scenario, [cpu_device()], tmp_path / "work")
        outcome = run_bench(scenario, targets[:2], notes, store, runs=1,
                            overrides=BenchOverrides(duration_s=1, min_valid=1),
                            workload_names=["resnet50-offline"])
        assert outcome.failure is None, outcome.failure
        [workload] = outcome.workloads
        [run_id] = workload.run_ids
        stored = store.run(run_id)
        assert stored is not None
        metrics = {(m.name, m.instance): m for m in store.metrics(run_id)}
    assert stored.workload_detail["min_valid"] == 1
    assert stored.workload_detail["stability_pct"] == 15.0
    assert any("warm-up windows must agree within 15%" in n for n in workload.workload.notes)
    names = [t.instance for t in targets[:2]]
    for name in names:
        assert metrics[("warmup_window_1", name)].unit == "samples/s"
        assert metrics[("warmup_stable", name)].value in (0.0, 1.0)
        assert metrics[(COMMON_WINDOW_THROUGHPUT, name)].value > 0
    assert 0.0 < metrics[(TIMED_OVERLAP, None)].value <= 1.0
    assert workload.series is not None
    assert workload.series.run_quality[TIMED_OVERLAP] == [metrics[(TIMED_OVERLAP, None)].value]
