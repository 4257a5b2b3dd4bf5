"""Copy runs between two results stores (``vgpu results --copy-to``): SQLite to
PostgreSQL, back, or between two of a kind.

A run is named in any store by its series id, repeat index and start time (ids differ
between stores), so a second copy finds every run already there and adds nothing. Each
run goes over with its instances, metrics and platform records in one transaction of the
target; runs still ``running`` in the source are left for a later copy. Baselines whose
run is copied (or already there) follow, pointing at the target's id of that run; a
baseline name the target already gives to another run keeps the target's. The series'
stored references (which series judges each) follow where the target has none. Raw log
folders are not copied: the instances keep the paths they had."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vgpu.results.store.records import Baseline, Run
from vgpu.results.store.result_store import ResultStore


@dataclass
class CopySummary:
    """What a copy did; ``describe()`` says it in one paragraph."""

    source: str
    target: str
    copied: dict[int, int] = field(default_factory=dict)  # source run id -> target run id
    already_there: int = 0
    still_running: list[int] = field(default_factory=list)
    instances: int = 0
    metrics: int = 0
    baselines_copied: list[str] = field(default_factory=list)
    baselines_kept: list[str] = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"copied {len(self.copied)} run(s) ({self.instances} instance(s), "
                 f"{self.metrics} metric(s)) from {self.source} to {self.target}; "
                 f"{self.already_there} already there"]
        if self.still_running:
            lines.append(f"not copied, still running: run(s) "
                         f"{', '.join(map(str, self.still_running))} (copy again later)")
        if self.baselines_copied:
            lines.append(f"baselines copied: {', '.join(self.baselines_copied)}")
        if self.baselines_kept:
            lines.append("baselines the target names differently, kept as they are there: "
                         + ", ".join(self.baselines_kept))
        return "\n".join(lines)


def _run_key(run: Run) -> tuple[str, int, float]:
    return (run.series_id, run.repeat_index, run.started_at)


def copy_runs(source: ResultStore, target: ResultStore, *,
              scenario_id: str | None = None) -> CopySummary:
    """Copy the finished runs of ``source`` (of one scenario, or all) that ``target``
    lacks, then the baselines that point at them."""
    summary = CopySummary(source=str(source.path), target=str(target.path))
    present = target.run_keys()
    target_ids: dict[int, int] = {}
    for run in source.runs(scenario_id=scenario_id):
        known = present.get(_run_key(run))
        if known is not None:
            target_ids[run.id] = known
            summary.already_there += 1
        elif run.status == "running":
            summary.still_running.append(run.id)
        else:
            instances = [stored.result for stored in source.instances(run.id)]
            metrics = source.metrics(run.id)
            target_ids[run.id] = target.import_run(run, instances, metrics)
            summary.copied[run.id] = target_ids[run.id]
            summary.instances += len(instances)
            summary.metrics += len(metrics)
    _copy_baselines(source, target, target_ids, summary)
    _copy_references(source, target, {run.series_id for run in source.runs(
        scenario_id=scenario_id) if run.id in target_ids})
    return summary


def _copy_references(source: ResultStore, target: ResultStore, series: set[str]) -> None:
    """Which series judges each copied series, where the target does not say it yet
    (series ids are the same in every store)."""
    for series_id in sorted(series):
        chosen = source.series_reference(series_id)
        if chosen is not None and target.series_reference(series_id) is None:
            target.put_series_reference(chosen)


def _copy_baselines(source: ResultStore, target: ResultStore, target_ids: dict[int, int],
                    summary: CopySummary) -> None:
    for baseline in source.baselines():
        run_id = target_ids.get(baseline.run_id)
        if run_id is None:  # its run is not part of this copy
            continue
        there = target.baseline(baseline.name)
        if there is None:
            target.put_baseline(Baseline(name=baseline.name, run_id=run_id,
                                         series_id=baseline.series_id,
                                         created_at=baseline.created_at))
            summary.baselines_copied.append(baseline.name)
        elif there.run_id != run_id:
            summary.baselines_kept.append(baseline.name)
    _copy_baseline_sets(source, target, summary)


def _copy_baseline_sets(source: ResultStore, target: ResultStore,
                        summary: CopySummary) -> None:
    """What each set a copied baseline belongs to was measured on (its host, hardware UUID
    and facts), where the target keeps no record of that set."""
    copied_sets = {name.split(":")[0] for name in summary.baselines_copied}
    for record in source.baseline_sets():
        if record.name in copied_sets and target.baseline_set(record.name) is None:
            target.put_baseline_set(record)


def copy_stores(source: Path | str, target: Path | str, *,
                scenario_id: str | None = None) -> CopySummary:
    """Open both stores (the source must exist; a new SQLite target file is created, a
    PostgreSQL target database must exist) and copy."""
    with ResultStore.open_existing(source) as source_store, \
            ResultStore.open(target) as target_store:
        return copy_runs(source_store, target_store, scenario_id=scenario_id)
