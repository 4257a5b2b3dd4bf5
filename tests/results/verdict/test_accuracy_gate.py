"""The accuracy gate in the judge: any instance below its accuracy threshold makes the
workload FAIL whatever its throughput, with the measured value in the reason."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from rich.console import Console

from loadgen.contract import AccuracySpec
from tests.results.series import Repeat, record_series
from vgpu.bench.outcome import BenchOutcome, WorkloadOutcome
from vgpu.bench.summary import as_json, workload_table
from vgpu.bench.workload import (
    BenchOverrides,
    EffectiveWorkload,
    effective_workload,
    harness_spec,
)
from vgpu.model import load_scenario
from vgpu.model.scenario import InferenceWorkload, Scenario
from vgpu.results.store.records import InstanceResult
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SeriesData, load_series
from vgpu.results.verdict.accuracy import ACCURACY_CHECK, ACCURACY_REFERENCE, accuracy_check
from vgpu.results.verdict.judge import judge_against_baseline

ROOT = Path(__file__).resolve().parents[3]
WORKLOAD = "resnet50-offline (resnet50/tiny fp32 Offline b4 onnxruntime)"
TARGET = 0.999


def accuracy(value: float) -> dict[str, Any]:
    return {"metric": "top1-agreement", "value": value, "target": TARGET, "threshold": TARGET,
            "samples": 256, "passed": value >= TARGET, "labels_from": "fp32-cpu-reference"}


def add_series(store: ResultStore, scenario_id: str,
               repeats: Sequence[dict[str, tuple[float, float | None]]],
               target: float | None = TARGET) -> SeriesData:
    """One ok run per repeat; each instance's (throughput, accuracy value or None)."""
    detail: dict[str, Any] = {"loadgen_scenario": "Offline"}
    if target is not None:
        detail["accuracy"] = {"target": target, "dataset": None, "samples": 256}
    runs = [Repeat([InstanceResult(
        name=name, status="ok", device_kind="cpu", validity="VALID", throughput=rate,
        result={"status": "ok", "accuracy": None if value is None else accuracy(value)})
        for name, (rate, value) in per_instance.items()]) for per_instance in repeats]
    stored = record_series(store, runs, scenario_id=scenario_id, workload=WORKLOAD,
                           workload_detail=detail)
    return load_series(store, stored.series_id)


def scenario() -> Scenario:
    return load_scenario(ROOT / "scenarios" / "mig_1x1g.yaml")  # baseline: scenario bm5


def test_instance_below_target_fails_without_a_baseline(store: ResultStore) -> None:
    candidate = add_series(store, "5", [{"vm-a": (9000.0, 1.0), "vm-b": (9100.0, 0.99609375)}])
    comparison, note = judge_against_baseline(store, scenario(), candidate)
    assert "no ok run of baseline scenario bm5" in note
    assert comparison is not None
    assert comparison.reference == ACCURACY_REFERENCE
    assert comparison.verdict == "FAIL"
    (check,) = comparison.checks
    assert check.metric == ACCURACY_CHECK
    assert "1 of 2 instance runs below the accuracy target" in check.reason
    assert "vm-b (run 1) top1-agreement 0.9961 < 0.9990" in check.reason
    assert check.difference_pct < 0


def test_accuracy_fails_a_workload_whose_throughput_passes(store: ResultStore) -> None:
    add_series(store, "bm5", [{"vm-a": (100.0, 1.0)}, {"vm-a": (101.0, 1.0)},
                              {"vm-a": (99.0, 1.0)}])
    candidate = add_series(store, "5", [{"vm-a": (200.0, 1.0)}, {"vm-a": (201.0, 0.5)},
                                        {"vm-a": (199.0, 1.0)}])
    comparison, _ = judge_against_baseline(store, scenario(), candidate)
    assert comparison is not None
    verdicts = {c.metric: c.verdict for c in comparison.checks}
    assert verdicts["system_throughput"] == "PASS"
    assert verdicts[ACCURACY_CHECK] == "FAIL"
    assert comparison.verdict == "FAIL"
    assert "top1-agreement 0.5000 < 0.9990" in comparison.checks[-1].reason


def test_every_instance_at_target_passes(store: ResultStore) -> None:
    candidate = add_series(store, "5", [{"vm-a": (10.0, 1.0), "vm-b": (10.0, 0.9995)}])
    check = accuracy_check(candidate)
    assert check is not None
    assert check.verdict == "PASS"
    assert "all 2 instance runs reach the target; lowest: vm-b (run 1) top1-agreement " \
           "0.9995 >= 0.9990" in check.reason


def test_missing_accuracy_under_a_target_fails(store: ResultStore) -> None:
    candidate = add_series(store, "5", [{"vm-a": (10.0, 1.0), "vm-b": (10.0, None)}])
    check = accuracy_check(candidate)
    assert check is not None
    assert check.verdict == "FAIL"
    assert "vm-b (run 1) reported no accuracy" in check.reason


def test_workload_without_target_is_not_gated(store: ResultStore) -> None:
    candidate = add_series(store, "5", [{"vm-a": (10.0, None)}], target=None)
    assert accuracy_check(candidate) is None
    comparison, _ = judge_against_baseline(store, scenario(), candidate)
    assert comparison is None


def test_summary_shows_the_lowest_accuracy_per_instance(store: ResultStore) -> None:
    candidate = add_series(store, "5", [{"vm-a": (10.0, 1.0)}, {"vm-a": (11.0, 0.75)}])
    effective = EffectiveWorkload(
        label="resnet50-offline", model="resnet50", variant="tiny", precision="fp32",
        backend="onnxruntime", scenario="Offline", batch=4, target_qps=None,
        target_latency_ms=None, duration_s=1.0, accuracy_target=TARGET)
    outcome = WorkloadOutcome(workload=effective, series_id=candidate.series_id,
                              series=candidate)
    console = Console(width=200, record=True)
    console.print(workload_table(outcome))
    text = console.export_text()
    assert "accuracy (lowest)" in text
    assert "0.7500 < 0.999" in text
    summary = as_json_instance(outcome)
    assert summary["lowest"] == 0.75
    assert summary["passed"] is False


def as_json_instance(outcome: WorkloadOutcome) -> dict[str, Any]:
    bench = BenchOutcome(scenario=scenario(), targets=[], notes=[], workloads=[outcome])
    return as_json(bench, "results.db", None)["workloads"][0]["instances"]["vm-a"]["accuracy"]


def test_scenario_accuracy_fields_reach_the_harness_spec() -> None:
    workload = InferenceWorkload(model="resnet50", accuracy_target=TARGET,
                                 accuracy_dataset="/data/val.npz", accuracy_samples=64)
    effective = effective_workload(workload, on_cpu=True, overrides=BenchOverrides())
    spec = harness_spec(effective, instance="vm-a", device={"kind": "cpu"}, threads=1)
    assert spec.accuracy == AccuracySpec(target=TARGET, dataset="/data/val.npz", samples=64)
    assert spec.to_json()["accuracy"] == {"target": TARGET, "dataset": "/data/val.npz",
                                          "samples": 64}
    probe = harness_spec(effective, instance="vm-a", device={"kind": "cpu"}, threads=1,
                         accuracy=False)
    assert probe.accuracy is None
    plain = effective_workload(InferenceWorkload(model="resnet50"), True, BenchOverrides())
    assert harness_spec(plain, instance="vm-a", device={"kind": "cpu"}, threads=1).accuracy \
        is None


def test_scenario_rejects_unusable_accuracy_datasets() -> None:
    cases = {
        "accuracy_dataset needs accuracy_target": {"model": "resnet50",
                                                   "accuracy_dataset": "val.npz"},
        "not supported for bert yet": {"model": "bert", "accuracy_target": TARGET,
                                       "accuracy_dataset": "squad.npz"},
        "must be an .npz": {"model": "resnet50", "accuracy_target": TARGET,
                            "accuracy_dataset": "val.json"},
    }
    for message, fields in cases.items():
        with pytest.raises(ValidationError, match=message):
            InferenceWorkload(**fields)
