"""How `vgpu bench` judges: each series' reference chosen once (vgpu.results.verdict.referee),
kept on its outcome while the series runs (its looks read it, they store nothing), stored
with its one verdict once the command's series have run; then the command's verdicts as
one family."""

from __future__ import annotations

from vgpu.bench.outcome import BenchOutcome, WorkloadOutcome
from vgpu.model.scenario import Scenario
from vgpu.results.store.records import SeriesReference
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SeriesData
from vgpu.results.verdict.judge import judge_stored, judged_as_one_family
from vgpu.results.verdict.referee import choose_reference


def reference_for(store: ResultStore, scenario: Scenario, result: WorkloadOutcome,
                  series: SeriesData) -> SeriesReference | None:
    """The reference ``scenario``'s baseline names for ``result``'s series (``series``,
    as stored so far), chosen at the first call and kept on ``result`` with its note;
    nothing is stored."""
    if not result.reference_chosen:
        result.reference, result.baseline_note = choose_reference(store, scenario, series)
        result.reference_chosen = True
    return result.reference


def judge_workloads(store: ResultStore, outcome: BenchOutcome) -> None:
    """The one verdict of each series ``outcome`` ran, its reference stored with it."""
    for result in outcome.workloads:
        if result.series is None:
            continue
        chosen = reference_for(store, outcome.scenario, result, result.series)
        if chosen is not None:
            store.put_series_reference(chosen)
        result.comparison = judge_stored(store, result.series).comparison


def judge_as_family(store: ResultStore, outcome: BenchOutcome) -> None:
    """The verdicts of ``outcome``'s workloads as one family, stored with them
    (vgpu.results.verdict.judge.judged_as_one_family)."""
    judged = [(w, w.comparison) for w in outcome.workloads if w.comparison is not None]
    family = judged_as_one_family(store, [(w.series_id, c) for w, c in judged])
    for (workload, _), comparison in zip(judged, family, strict=True):
        workload.comparison = comparison
