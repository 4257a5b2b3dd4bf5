from __future__ import annotations

import csv
import io
import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from vgpu.errors import InputError
from vgpu.results.export.runs import export_csv, export_json
from vgpu.results.store.migrations import SCHEMA_VERSION
from vgpu.results.store.records import InstanceResult, Metric, Platform, RunStart
from vgpu.results.store.result_store import ResultStore

AddSeries = Callable[..., list[int]]

START = RunStart(series_id="s1", scenario_id="6", scenario_name="mixed",
                 workload="resnet50/tiny onnxruntime Offline", target_kind="local")


def test_new_database_is_migrated_to_the_latest_schema(tmp_path: Path) -> None:
    with ResultStore.open(tmp_path / "r.db") as store:
        assert store.schema_version == SCHEMA_VERSION >= 1
        assert store.integrity_check() == "ok"
    with ResultStore.open(tmp_path / "r.db") as again:  # reopening migrates nothing twice
        assert again.schema_version == SCHEMA_VERSION


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(InputError, match="newer than this vgpu knows"):
        ResultStore.open(path)


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are not the results you are looking for\n" * 100)
    with pytest.raises(InputError) as error:
        ResultStore.open(path)
    assert "notes.db" in str(error.value) and error.value.exit_code == 2
    assert path.read_text().startswith("these are not")


def test_run_lifecycle_with_instances_metrics_and_platform(store: ResultStore) -> None:
    platform = Platform(host="esx1", esxi_version="8.0.2", gpu="A100 80GB",
                        vgpu_profile="grid_a100d-4-40c", mig_profile="4g.40gb",
                        attachment="vgpu", vcpus=32, memory_gb=64, harness_version="0.1.0")
    run_id = store.begin_run(RunStart(**{**START.__dict__, "platform": platform}))
    running = store.run(run_id)
    assert running is not None and running.status == "running" and running.ended_at is None
    instance = InstanceResult(
        name="vm-4g", status="ok", device_kind="mig", mig_profile="4g.40gb",
        mig_uuid="MIG-1234", validity="VALID", throughput=123.5,
        latency_ns={"p50": 1e6, "p99": 3e6}, result={"status": "ok", "x": [1, 2]},
        platform=platform,
    )
    store.finish_run(run_id, "ok", instances=[instance],
                     metrics=[Metric("power", 250.0, "W", instance="vm-4g")], sync_skew_s=0.003)
    run = store.run(run_id)
    assert run is not None
    assert (run.status, run.sync_skew_s, run.platform) == ("ok", 0.003, platform)
    assert run.ended_at is not None and run.ended_at >= run.started_at
    [stored] = store.instances(run_id)
    assert stored.result == instance
    assert store.metrics(run_id) == [Metric("power", 250.0, "W", instance="vm-4g")]
    with pytest.raises(ValueError, match="already ok"):
        store.finish_run(run_id, "failed")


def test_a_failed_write_leaves_nothing_half_done(store: ResultStore) -> None:
    run_id = store.begin_run(START)
    twin = InstanceResult(name="same", status="ok", throughput=1.0)
    with pytest.raises(sqlite3.IntegrityError):
        store.finish_run(run_id, "ok", instances=[twin, twin])
    run = store.run(run_id)
    assert run is not None and run.status == "running"
    assert store.instances(run_id) == []


def test_a_run_whose_process_died_is_marked_aborted_and_earlier_runs_survive(
    tmp_path: Path, add_series: AddSeries, store: ResultStore
) -> None:
    earlier = add_series([{"a": 10.0}, {"a": 11.0}])
    script = (
        "import os, sys\n"
        "from vgpu.results.store.result_store import ResultStore\n"
        "from vgpu.results.store.records import RunStart\n"
        "store = ResultStore.open(sys.argv[1])\n"
        "store.begin_run(RunStart(series_id='x', scenario_id='6', scenario_name='m', "
        "workload='w', target_kind='local'))\n"
        "os._exit(9)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(store.path)], check=False, timeout=60)
    with ResultStore.open(store.path) as reopened:
        [orphan] = reopened.runs(series_id="x")
        assert orphan.status == "aborted"
        assert "ended before the run finished" in (orphan.reason or "")
        assert [r.status for r in reopened.runs(status="ok")] == ["ok", "ok"]
        assert [i.result.throughput for r in earlier for i in reopened.instances(r)] == [
            10.0, 11.0]
        assert reopened.integrity_check() == "ok"


def test_a_running_run_of_a_live_process_is_left_alone(store: ResultStore) -> None:
    run_id = store.begin_run(START)
    assert store.recover_orphaned_runs() == []
    run = store.run(run_id)
    assert run is not None and run.status == "running"


def test_baseline_names_the_series_of_a_run(store: ResultStore, add_series: AddSeries) -> None:
    ids = add_series([{"a": 1.0}, {"a": 2.0}], target_kind="bare-metal")
    baseline = store.set_baseline(ids[1], name="bm-6")
    assert baseline.series_id == store.run(ids[0]).series_id  # type: ignore[union-attr]
    assert store.baseline("bm-6") == baseline
    default = store.set_baseline(ids[0])
    assert default.name == "6:resnet50/tiny onnxruntime Offline"
    with pytest.raises(InputError, match="no run 999"):
        store.set_baseline(999)


def test_a_failed_run_cannot_be_a_baseline(store: ResultStore) -> None:
    run_id = store.record_run(START, "failed", reason="instance vm-1 died")
    with pytest.raises(InputError, match="is failed"):
        store.set_baseline(run_id)


def test_export_csv_and_json(store: ResultStore, add_series: AddSeries) -> None:
    add_series([{"a": 10.0, "b": 20.0}])
    store.record_run(START, "failed", reason="boom")
    rows = list(csv.DictReader(io.StringIO(export_csv(store, store.runs()))))
    assert [(r["instance"], r["throughput"], r["status"]) for r in rows] == [
        ("a", "10.0", "ok"), ("b", "20.0", "ok"), ("", "", "failed")]
    assert rows[0]["device"] == "CPU, no MIG slice"
    data = json.loads(export_json(store, store.runs()))
    assert [len(r["instances"]) for r in data] == [2, 0]
    assert data[1]["reason"] == "boom"


def test_a_record_stored_by_an_older_harness_reads_as_a_run_result(tmp_path: Path) -> None:
    """The store keeps result.json as written and parses it on read: a record from before
    the software, token, stability and completion sections reads, with what it has."""
    old = {"schema_version": 1, "harness_version": "0.1.0", "status": "ok", "reason": None,
           "scenario": "Offline", "throughput": {"samples_per_second": 95},
           "latency_ns": {"p50": 9e6, "p90": 1e7, "p99": 1.2e7},
           "validity": {"result": "VALID"}, "device": {"kind": "cpu"},
           "accuracy": {"metric": "top-1", "value": 0.76, "target": 0.75}}
    with ResultStore.open(tmp_path / "r.db") as store:
        run_id = store.begin_run(START)
        store.finish_run(run_id, "ok", instances=[
            InstanceResult(name="i1", status="ok", result=old),
            InstanceResult(name="i2", status="failed")])  # wrote no result.json
    with ResultStore.open(tmp_path / "r.db") as again:
        first, second = (s.result for s in again.instances(run_id))
    assert first.result == old  # kept as the harness wrote it
    parsed = first.run_result
    assert (parsed.harness_version, parsed.throughput, parsed.scenario) == \
        ("0.1.0", 95.0, "Offline")
    assert parsed.latency_ns == {"p50": 9e6, "p90": 1e7, "p99": 1.2e7}
    assert parsed.validity is not None and parsed.validity.result == "VALID"
    assert parsed.validity.reasons == () and parsed.validity.min_duration_met is None
    assert parsed.accuracy == old["accuracy"] and parsed.stability is None
    assert parsed.software.cuda_version is None and not parsed.has_tokens
    assert second.run_result.throughput is None and second.run_result.telemetry is None
