"""Repeats of a scenario's training workloads, stored as one series per workload and
judged against the scenario's baseline (its bare-metal counterpart or a named baseline)
the way inference series are (`vgpu.results.verdict.judge`). :func:`run_training_bench` is what
`vgpu train run` and `vgpu bench` of a training scenario call."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vgpu.model.scenario import Scenario, TrainingWorkload
from vgpu.results.store.records import TargetKind
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import load_series
from vgpu.results.verdict.compare import Comparison
from vgpu.results.verdict.judge import judge_against_baseline
from vgpu.site import Site
from vgpu.train.launch import TrainNode
from vgpu.train.scenario_runner import (
    Overrides,
    TrainingRun,
    local_gpu_count,
    run_training_scenario,
)
from vgpu.train.targets import inventory_nodes

# On a CPU the study's ResNet50 at batch 1024 would take hours per step: a CPU run is a
# functional check of the whole path, so it uses the small ResNet unless asked otherwise.
CPU_CHECK = Overrides(model="resnet-tiny", image_size=32, batch_per_gpu=8)
RUN_COMMAND = "vgpu train run"


@dataclass
class WorkloadSeries:
    workload: str
    series_id: str
    runs: list[TrainingRun] = field(default_factory=list)
    comparison: Comparison | None = None
    baseline_note: str = ""


@dataclass
class TrainingOutcome:
    """What `vgpu train run` did: the series of every training workload."""

    scenario: Scenario
    series: list[WorkloadSeries]

    @property
    def failure(self) -> str | None:
        for one in self.series:
            for run in one.runs:
                if run.record.get("status") != "ok":
                    return f"{one.workload}: {run.record.get('reason')}"
        return None

    @property
    def verdict_failed(self) -> bool:
        return any(s.comparison is not None and s.comparison.verdict == "FAIL"
                   for s in self.series)


def judge_series(store: ResultStore, scenario: Scenario, series: WorkloadSeries) -> None:
    """The stored series judged against the scenario's baseline (its throughput, with the
    scenario's tolerance); without an ok run there is nothing to judge."""
    if not store.runs(series_id=series.series_id, status="ok"):
        series.baseline_note = "no repeat finished ok"
        return
    series.comparison, series.baseline_note = judge_against_baseline(
        store, scenario, load_series(store, series.series_id), RUN_COMMAND)


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
        judge_series(store, scenario, one)
    return list(series.values())


def site_nodes(
    scenario: Scenario, site: Site, store: ResultStore
) -> tuple[list[TrainNode], TargetKind, list[str]]:
    return inventory_nodes(scenario, site, store.logs_root / "train-hosts")


def close_nodes(nodes: Sequence[TrainNode]) -> None:
    for node in nodes:
        close = getattr(node.shell, "close", None)
        if close is not None:
            close()


def run_training_bench(
    scenario: Scenario,
    site: Site,
    store: ResultStore,
    *,
    runs: int | None = None,
    full_models: bool = False,
    on_note: Callable[[str], None] = lambda _note: None,
) -> TrainingOutcome:
    """The scenario's training workloads on the VMs / bare-metal hosts of the site's
    inventory (one torchrun node each; ``on_note`` hears what was noted finding them) or, without
    one, on this machine; ``runs`` repeats (default: the scenario's), stored and judged.
    Without GPUs the small functional check runs unless ``full_models``."""
    nodes: list[TrainNode] | None = None
    target_kind: TargetKind = "local"
    if site.inventory is not None:
        nodes, target_kind, notes = site_nodes(scenario, site, store)
        for note in notes:
            on_note(note)
    has_gpus = all(n.gpus for n in nodes) if nodes is not None else local_gpu_count() > 0
    try:
        series = run_training_series(
            scenario, nodes, store.logs_root / "train" / scenario.id, store, repeats=runs,
            overrides=Overrides() if full_models or has_gpus else CPU_CHECK,
            target_kind=target_kind,
        )
    finally:
        close_nodes(nodes or [])
    return TrainingOutcome(scenario, series)
