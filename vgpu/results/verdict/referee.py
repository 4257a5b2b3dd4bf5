"""Which series judges which, one rule for `vgpu bench`, `compare`, `revalidate` and
`report`. When a series runs, :func:`choose_reference` picks its reference from its
scenario's baseline and the store, and the store records that choice
(:class:`~vgpu.results.store.records.SeriesReference`): the reference series, how it is related
(bare-metal twin run interleaved block by block, the newest stored series of the twin,
a named baseline), the comparison kind and the tolerances. Every later verdict reads the
choice back (:func:`reference_of`) instead of reading the scenario file again."""

from __future__ import annotations

from collections.abc import Mapping

from vgpu.model.scenario import Scenario, Tolerances
from vgpu.results.store.records import Baseline, SeriesReference
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import WORST_P99, SeriesData, load_series
from vgpu.results.store.tokens import tolerances as token_tolerances
from vgpu.results.verdict.capacity_checks import CAPACITY_CHECK
from vgpu.results.verdict.compare import ComparisonKind

INTERLEAVED_TWIN = "interleaved-twin"  # the baseline scenario ran block by block with it
TWIN = "twin"  # the newest stored series of the baseline scenario
NAMED_BASELINE = "named-baseline"  # `vgpu baseline set`
# Series stored without a reference (older databases, other producers): a VM series
# against the newest bare-metal series of its own scenario id and workload.
SAME_SCENARIO_BARE_METAL = "same-scenario-bare-metal"
_TWINS = (INTERLEAVED_TWIN, TWIN, SAME_SCENARIO_BARE_METAL)
# A scenario's throughput gain is measured against scenario 1: one VM with the whole GPU
# (lab study A), the study's headline numbers.
GAIN_REFERENCE_SCENARIO = "1"


def default_kind(candidate: SeriesData, reference: SeriesData) -> ComparisonKind:
    """Picks the comparison a pair of series implies."""
    if reference.target_kind == "bare-metal" and candidate.target_kind == "vm":
        return "vm-vs-bare-metal"  # a VM scenario and its bare-metal twin differ in id
    if candidate.scenario_id != reference.scenario_id:
        return "scenario-vs-scenario"
    return "run-vs-baseline"


def comparison_kind(candidate: SeriesData, reference: SeriesData,
                    relation: str) -> ComparisonKind:
    """The kind follows the relation: a series judged against its bare-metal twin is VM vs
    bare metal whether it ran in a VM or on this machine in the VM scenario's place, so
    its latency checks are made; otherwise :func:`default_kind`."""
    if relation in _TWINS and reference.target_kind == "bare-metal" and \
            candidate.target_kind in ("vm", "local"):
        return "vm-vs-bare-metal"
    return default_kind(candidate, reference)


def metric_tolerances(tolerances: Tolerances) -> dict[str, float]:
    """The scenario's per-metric bands (fractions): latency for the worst p99, ttft_pct and
    tpot_pct for an LLM series' token latencies, capacity_pct for its capacity at the SLO;
    throughput_pct is the default band."""
    capacity = {} if tolerances.capacity_pct is None else \
        {CAPACITY_CHECK: tolerances.capacity_pct / 100.0}
    return {WORST_P99: tolerances.latency_pct / 100.0,
            **token_tolerances(tolerances.ttft_pct, tolerances.tpot_pct), **capacity}


def throughput_tolerance(tolerances: Tolerances) -> float:
    """The scenario's default band (throughput_pct) as a fraction."""
    return tolerances.throughput_pct / 100.0


def _ok_series(store: ResultStore, series_id: str | None) -> SeriesData | None:
    if not series_id or not store.runs(series_id=series_id, status="ok"):
        return None
    return load_series(store, series_id)


def _reference(candidate: SeriesData, reference: SeriesData, relation: str,
               tolerance: float, tolerances: dict[str, float], note: str) -> SeriesReference:
    return SeriesReference(
        series_id=candidate.series_id, reference_series=reference.series_id,
        relation=relation, kind=comparison_kind(candidate, reference, relation),
        tolerance=tolerance, tolerances=tolerances, note=note)


def choose_reference(
    store: ResultStore, scenario: Scenario, candidate: SeriesData,
    run_command: str = "vgpu bench",
) -> tuple[SeriesReference | None, str]:
    """The reference ``scenario``'s baseline names for the series ``candidate``: the
    named baseline (`vgpu baseline set`), else the series of the baseline scenario it ran
    interleaved with, else the newest series of the baseline scenario with the same
    workload; with the scenario's tolerances. The note says which, or why there is none
    (``run_command`` is what stores a series of the baseline scenario)."""
    baseline = scenario.baseline
    if baseline is None:
        return None, "the scenario names no baseline"
    tolerance = throughput_tolerance(scenario.tolerances)
    bands = metric_tolerances(scenario.tolerances)
    if baseline.reference_run:
        named = store.baseline(baseline.reference_run)
        reference = None if named is None else _ok_series(store, named.series_id)
        if reference is None:
            return None, (f"baseline '{baseline.reference_run}' is not set in {store.path} "
                          "(`vgpu baseline set RUN_ID --name ...`)")
        note = f"baseline '{baseline.reference_run}'"
        return _reference(candidate, reference, NAMED_BASELINE, tolerance, bands, note), note
    partner = _ok_series(store, candidate.interleaved_with)
    if partner is not None and partner.scenario_id == str(baseline.scenario):
        note = f"scenario {baseline.scenario}, run interleaved with this one"
        return _reference(candidate, partner, INTERLEAVED_TWIN, tolerance, bands, note), note
    latest = _ok_series(store, store.latest_series(
        scenario_id=str(baseline.scenario), workload=candidate.workload,
        exclude_series=candidate.series_id))
    if latest is None:
        return None, (f"no ok run of baseline scenario {baseline.scenario} with workload "
                      f"{candidate.workload} in {store.path}: run `{run_command} --scenario "
                      f"{baseline.scenario}` with the same settings first")
    note = f"scenario {baseline.scenario}"
    return _reference(candidate, latest, TWIN, tolerance, bands, note), note


def reference_of(store: ResultStore, candidate: SeriesData, tolerance: float,
                 chosen: SeriesReference | None = None) -> SeriesReference | None:
    """Which series judges the stored series ``candidate``: the reference its run stored
    (:func:`choose_reference`), or ``chosen`` for a series still running (its reference
    chosen, not stored yet); for a series with none, the bare-metal series it ran
    interleaved with, else for a VM series the newest bare-metal series of its scenario
    id and workload, both with the one band ``tolerance``; else None."""
    stored = chosen or store.series_reference(candidate.series_id)
    if stored is not None and _ok_series(store, stored.reference_series) is not None:
        return stored
    partner = _ok_series(store, candidate.interleaved_with)
    if partner is not None and partner.target_kind == "bare-metal" and \
            candidate.target_kind in ("vm", "local"):
        return _reference(candidate, partner, INTERLEAVED_TWIN, tolerance, {},
                          f"scenario {partner.scenario_id}, run interleaved with this one")
    if candidate.target_kind != "vm":
        return None
    latest = _ok_series(store, store.latest_series(
        scenario_id=candidate.scenario_id, workload=candidate.workload,
        target_kind="bare-metal", exclude_series=candidate.series_id))
    if latest is None:
        return None
    return _reference(candidate, latest, SAME_SCENARIO_BARE_METAL, tolerance, {},
                      f"scenario {latest.scenario_id} on bare metal")


def kind_between(store: ResultStore, candidate: SeriesData,
                 reference: SeriesData) -> ComparisonKind:
    """The kind of comparing two given series: the one the candidate's run stored when
    ``reference`` is its stored reference, else the one the pair implies."""
    stored = store.series_reference(candidate.series_id)
    if stored is not None and stored.reference_series == reference.series_id:
        return comparison_kind(candidate, reference, stored.relation)
    return default_kind(candidate, reference)


def against_named_baseline(scenario: Scenario, candidate: SeriesData,
                           baseline: Baseline) -> SeriesReference:
    """The stored ``baseline`` (`vgpu revalidate`'s pre-upgrade series of the same
    scenario and workload) as the reference of ``candidate``: run vs baseline, with
    ``scenario``'s tolerances."""
    return SeriesReference(
        series_id=candidate.series_id, reference_series=baseline.series_id,
        relation=NAMED_BASELINE, kind="run-vs-baseline",
        tolerance=throughput_tolerance(scenario.tolerances),
        tolerances=metric_tolerances(scenario.tolerances),
        note=f"baseline '{baseline.name}'")


def gain_reference(candidate: SeriesData,
                   latest: Mapping[tuple[str, str, str], SeriesData]) -> SeriesData | None:
    """What ``candidate``'s throughput gain is measured against: of ``latest`` (the
    latest series by scenario id, workload and target kind), scenario
    GAIN_REFERENCE_SCENARIO's with the same workload and target kind; None for that
    scenario itself or when it has none."""
    if candidate.scenario_id == GAIN_REFERENCE_SCENARIO:
        return None
    return latest.get((GAIN_REFERENCE_SCENARIO, candidate.workload, candidate.target_kind))
