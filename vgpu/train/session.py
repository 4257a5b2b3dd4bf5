"""Repeats of a scenario's training workloads, stored as one series, and the verdict of the
series against the scenario's baseline (e.g. its bare-metal counterpart)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vgpu.model.scenario import Scenario, TrainingWorkload
from vgpu.results.compare import Check, band_for, compare_samples
from vgpu.results.records import TargetKind
from vgpu.results.store import ResultStore
from vgpu.train.bench import Overrides, TrainingRun, run_training_scenario
from vgpu.train.launch import TrainNode
from vgpu.train.records import THROUGHPUT

# On a CPU the study's ResNet50 at batch 1024 would take hours per step: a CPU run is a
# functional check of the whole path, so it uses the small ResNet unless asked otherwise.
CPU_CHECK = Overrides(model="resnet-tiny", image_size=32, batch_per_gpu=8)


@dataclass
class WorkloadSeries:
    workload: str
    series_id: str
    runs: list[TrainingRun] = field(default_factory=list)
    check: Check | None = None
    baseline_note: str = ""

    @property
    def throughputs(self) -> list[float]:
        return [r.record["totals"]["images_per_s"] for r in self.runs
                if r.record.get("status") == "ok"]


def series_throughputs(store: ResultStore, series_id: str) -> list[float]:
    values: list[float] = []
    for run in store.runs(series_id=series_id, status="ok", kind="training"):
        values.extend(m.value for m in store.metrics(run.id)
                      if m.name == THROUGHPUT and m.instance is None)
    return values


def judge_against_baseline(
    store: ResultStore, scenario: Scenario, series: WorkloadSeries
) -> None:
    if scenario.baseline is None or scenario.baseline.scenario is None:
        series.baseline_note = "the scenario names no baseline scenario"
        return
    reference_id = store.latest_series(
        scenario_id=scenario.baseline.scenario, workload=series.workload,
        exclude_series=series.series_id,
    )
    if reference_id is None:
        series.baseline_note = (
            f"no ok training run of {scenario.baseline.scenario} ({series.workload}) stored: "
            f"run `vgpu train run --scenario {scenario.baseline.scenario}` first"
        )
        return
    band = band_for(higher_is_better=True, tolerance=scenario.tolerances.throughput_pct / 100)
    series.check = compare_samples(
        THROUGHPUT, series.throughputs, series_throughputs(store, reference_id), band,
        "images/s",
    )
    series.baseline_note = f"against scenario {scenario.baseline.scenario}"


def run_training_series(
    scenario: Scenario,
    targets: Sequence[TrainNode] | None,
    out_root: Path,
    store: ResultStore,
    *,
    repeats: int | None = None,
    overrides: Overrides | None = None,
    target_kind: TargetKind = "local",
) -> list[WorkloadSeries]:
    """Runs every training workload ``repeats`` times (default: the scenario's), each
    repeat stored as a run of one series per workload, then judges each series."""
    labels = [w.label for w in scenario.workloads if isinstance(w, TrainingWorkload)]
    series = {label: WorkloadSeries(label, uuid.uuid4().hex[:12]) for label in labels}
    for repeat in range(repeats or scenario.repeats):
        for label, one in series.items():
            (run,) = run_training_scenario(
                scenario, targets, out_root / f"repeat{repeat}", store=store,
                series_id=one.series_id, repeat_index=repeat, target_kind=target_kind,
                overrides=overrides, workloads=[label],
            )
            one.runs.append(run)
    for one in series.values():
        judge_against_baseline(store, scenario, one)
    return list(series.values())

