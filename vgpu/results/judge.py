"""Builds the three kinds of comparison from stored series: VM vs bare metal, scenario vs
scenario, run vs baseline (series or reference values); and a scenario's series judged
against the series its baseline names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from vgpu.model.scenario import Scenario, Tolerances
from vgpu.results.accuracy import with_accuracy_gate
from vgpu.results.compare import (
    Band,
    Check,
    Comparison,
    ComparisonKind,
    Reference,
    band_for,
    check_reference,
    compare_paired,
    compare_samples,
)
from vgpu.results.noise import NoiseLevels, uncalibrated
from vgpu.results.noise_store import levels_for
from vgpu.results.platforms import platform_changes
from vgpu.results.series import WORST_P99, SeriesData, interleaved_pairs, load_series
from vgpu.results.store import ResultStore
from vgpu.results.tokens import TOKEN_METRICS
from vgpu.results.tokens import tolerances as token_tolerances


class _Pairing:
    """How two series are compared: block by block when they ran interleaved (the
    positions of their valid repeats that share a block), else as separate series with the
    series level of ``levels``."""

    def __init__(self, candidate: SeriesData, reference: SeriesData,
                 levels: NoiseLevels) -> None:
        self.pairs = interleaved_pairs(candidate, reference)
        self.levels = levels

    def check(self, name: str, cand: list[float], ref: list[float], band: Band,
              unit: str) -> Check:
        if self.pairs is None:
            return compare_samples(name, cand, ref, band, unit, self.levels)
        if len(cand) != len(self.pairs.candidate) or len(ref) != len(self.pairs.reference):
            raise ValueError(f"{name}: a value is missing from a valid repeat")
        return compare_paired(name, [cand[i] for i, _ in self.pairs.positions],
                              [ref[j] for _, j in self.pairs.positions], band, unit,
                              self.pairs.blocks)


def _shared_checks(
    candidate: SeriesData, reference: SeriesData, tolerances: Mapping[str, float],
    default_tolerance: float, pairing: _Pairing, metrics: list[str] | None = None,
) -> list[Check]:
    names = metrics or candidate.judged_metrics or [
        n for n in candidate.samples if n in reference.samples
    ]
    checks: list[Check] = []
    for name in names:
        if name not in candidate.samples or name not in reference.samples:
            continue
        if name == WORST_P99 and not candidate.latency_matters:
            continue  # Offline latency is the whole batch's wait, not a service level
        sample = candidate.samples[name]
        band = band_for(sample.higher_is_better, tolerances.get(name, default_tolerance))
        checks.append(pairing.check(name, sample.values, reference.samples[name].values,
                                    band, sample.unit))
    return checks


def _instance_checks(candidate: SeriesData, reference: SeriesData,
                     tolerance: float, pairing: _Pairing) -> list[Check]:
    """Against a baseline of the same scenario, each instance's throughput on its own:
    one slower guest is a finding even when the others, given the cores it no longer
    uses, keep the system total."""
    band = band_for(higher_is_better=True, tolerance=tolerance)
    return [pairing.check(f"throughput {name}", values,
                          reference.per_instance_throughput[name], band, "samples/s")
            for name, values in candidate.per_instance_throughput.items()
            if len(candidate.per_instance_throughput) > 1
            and len(reference.per_instance_throughput.get(name, [])) >= 2
            and len(values) >= 2]


def _shortfalls(*series: SeriesData) -> list[str]:
    return [note for data in series if (note := data.valid_shortfall) is not None]


def compare_series(
    kind: ComparisonKind,
    candidate: SeriesData,
    reference: SeriesData,
    *,
    tolerance: float,
    tolerances: Mapping[str, float] | None = None,
    min_gain: float | None = None,
    levels: NoiseLevels | None = None,
) -> Comparison:
    """``vm-vs-bare-metal`` and ``run-vs-baseline`` judge every shared metric (throughput
    may not drop, latency may not rise, beyond its tolerance; a training series only its
    throughput). ``scenario-vs-scenario`` judges the headline throughput (system samples/s,
    training images/s): the gain must be at least ``min_gain`` (default -tolerance, i.e.
    not worse). A side with fewer VALID repeats than it asks for cannot PASS. Series that
    ran interleaved are compared block by block; others as separate series whose
    difference carries the series level of ``levels`` (default: the stated
    uncalibrated one)."""
    per_metric = dict(tolerances or {})
    pairing = _Pairing(candidate, reference, levels or uncalibrated())
    if kind == "scenario-vs-scenario":
        checks: list[Check] = []
        headline = candidate.headline
        if headline in candidate.samples and headline in reference.samples:
            floor = -tolerance if min_gain is None else min_gain
            sample = candidate.samples[headline]
            checks.append(pairing.check(headline, sample.values,
                                        reference.samples[headline].values,
                                        Band(lower_pct=floor * 100.0), sample.unit))
        # An LLM series is also judged on its tokens: a slice that keeps its samples/s but
        # doubles the time to first token is no equal.
        checks += _shared_checks(candidate, reference, per_metric, tolerance, pairing,
                                 list(TOKEN_METRICS))
        title = f"scenario {candidate.scenario_id} vs scenario {reference.scenario_id}"
    else:
        checks = _shared_checks(candidate, reference, per_metric, tolerance, pairing)
        if kind == "run-vs-baseline" and candidate.kind != "training":
            checks += _instance_checks(candidate, reference, tolerance, pairing)
        title = (
            f"{candidate.workload}: VM vs bare metal, scenario {candidate.scenario_id}"
            if kind == "vm-vs-bare-metal"
            else f"{candidate.label} vs baseline {reference.label}"
        )
    return Comparison(
        kind=kind, title=title, candidate=candidate.label, reference=reference.label,
        checks=checks, platform_changes=platform_changes(candidate, reference),
        shortfalls=_shortfalls(candidate, reference),
        disturbed=[*candidate.disturbances, *reference.disturbances],
    )


def compare_with_references(
    candidate: SeriesData, references: Mapping[str, Reference], reference_label: str,
    levels: NoiseLevels | None = None,
) -> Comparison:
    """Run vs baseline given as reference data (value, lower, upper, unit) per metric; the
    candidate's own series level (``levels``, default the stated uncalibrated one) is in
    the interval: the value stands for another time's series."""
    checks = [
        check_reference(name, candidate.samples[name].values, ref, levels or uncalibrated())
        for name, ref in references.items()
        if name in candidate.samples
    ]
    missing = [name for name in references if name not in candidate.samples]
    if missing:
        raise KeyError(
            f"{candidate.label} has no metric {', '.join(missing)} "
            f"(it has: {', '.join(sorted(candidate.samples))})"
        )
    return Comparison(
        kind="run-vs-baseline", title=f"{candidate.label} vs references {reference_label}",
        candidate=candidate.label, reference=reference_label, checks=checks,
        shortfalls=_shortfalls(candidate), disturbed=candidate.disturbances,
    )


def default_kind(candidate: SeriesData, reference: SeriesData) -> ComparisonKind:
    """Picks the comparison a pair of series implies."""
    if reference.target_kind == "bare-metal" and candidate.target_kind == "vm":
        return "vm-vs-bare-metal"  # a VM scenario and its bare-metal twin differ in id
    if candidate.scenario_id != reference.scenario_id:
        return "scenario-vs-scenario"
    return "run-vs-baseline"


def baseline_series(
    store: ResultStore, scenario: Scenario, workload: str, exclude_series: str,
    run_command: str = "vgpu bench", partner_series: str | None = None,
) -> tuple[SeriesData | None, str]:
    """The series ``scenario``'s baseline names for ``workload``: the named baseline
    (`vgpu baseline set`), else ``partner_series`` when the candidate ran interleaved
    with a series of the baseline scenario, else the newest series of the baseline
    scenario other than ``exclude_series``; and a note saying which, or why there is none
    (``run_command`` is what stores a series of the baseline scenario)."""
    baseline = scenario.baseline
    if baseline is None:
        return None, "the scenario names no baseline"
    if baseline.reference_run:
        named = store.baseline(baseline.reference_run)
        if named is None:
            return None, (f"baseline '{baseline.reference_run}' is not set in {store.path} "
                          "(`vgpu baseline set RUN_ID --name ...`)")
        return load_series(store, named.series_id), f"baseline '{baseline.reference_run}'"
    partner = _interleaved_partner(store, partner_series, str(baseline.scenario))
    if partner is not None:
        return partner, f"scenario {baseline.scenario}, run interleaved with this one"
    series_id = store.latest_series(scenario_id=str(baseline.scenario), workload=workload,
                                    exclude_series=exclude_series)
    if series_id is None:
        return None, (f"no ok run of baseline scenario {baseline.scenario} with workload "
                      f"{workload} in {store.path}: run `{run_command} --scenario "
                      f"{baseline.scenario}` with the same settings first")
    return load_series(store, series_id), f"scenario {baseline.scenario}"


def _interleaved_partner(store: ResultStore, partner: str | None,
                         scenario_id: str) -> SeriesData | None:
    """``partner`` (the series a candidate ran interleaved with) when it is a series of
    ``scenario_id``."""
    if not partner:
        return None
    partner_runs = store.runs(series_id=partner, status="ok")
    if not partner_runs or partner_runs[0].scenario_id != scenario_id:
        return None
    return load_series(store, partner)


def metric_tolerances(tolerances: Tolerances) -> dict[str, float]:
    """The scenario's per-metric bands (fractions): latency for the worst p99, ttft_pct and
    tpot_pct for an LLM series' token latencies; throughput_pct is the default band."""
    return {WORST_P99: tolerances.latency_pct / 100.0,
            **token_tolerances(tolerances.ttft_pct, tolerances.tpot_pct)}


def judge_against_baseline(
    store: ResultStore, scenario: Scenario, candidate: SeriesData,
    run_command: str = "vgpu bench",
) -> tuple[Comparison | None, str]:
    """A stored series judged against its scenario's baseline with the scenario's
    tolerances, and the note of :func:`baseline_series`; the accuracy gate
    (vgpu.results.accuracy) is judged with or without a baseline."""
    reference, note = baseline_series(store, scenario, candidate.workload,
                                      candidate.series_id, run_command,
                                      candidate.interleaved_with)
    if reference is None:
        gate = with_accuracy_gate(None, candidate)
        return (None if gate is None else replace(gate, shortfalls=_shortfalls(candidate))), note
    comparison = compare_series(
        default_kind(candidate, reference), candidate, reference,
        tolerance=scenario.tolerances.throughput_pct / 100.0,
        tolerances=metric_tolerances(scenario.tolerances),
        levels=levels_for(store, candidate),
    )
    return with_accuracy_gate(comparison, candidate), note
