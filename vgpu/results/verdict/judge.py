"""Builds the three kinds of comparison from stored series: VM vs bare metal, scenario vs
scenario, run vs baseline (series or reference values); and the one verdict of a stored
series against the reference vgpu.results.verdict.referee says it has."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import cast

from vgpu.model.scenario import Scenario
from vgpu.results.stats.noise import NoiseLevels, uncalibrated
from vgpu.results.store.records import SeriesReference
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import (
    SYSTEM_THROUGHPUT,
    WORST_P99,
    SeriesData,
    interleaved_pairs,
    invalid_split,
    load_series,
)
from vgpu.results.store.tokens import OUTPUT_TOKEN_THROUGHPUT, TOKEN_METRICS
from vgpu.results.verdict.accuracy import with_accuracy_gate
from vgpu.results.verdict.allowance import allowance_shortfall
from vgpu.results.verdict.capacity_checks import capacity_checks, kept_at_look
from vgpu.results.verdict.compare import (
    Band,
    Check,
    Comparison,
    ComparisonKind,
    Reference,
    at_look,
    band_for,
    carry_over,
    check_reference,
    compare_paired,
    compare_samples,
    one_family,
)
from vgpu.results.verdict.noise_store import levels_against
from vgpu.results.verdict.offered_rate import measured_capacity, offered_rate_check
from vgpu.results.verdict.platforms import platform_changes
from vgpu.results.verdict.referee import choose_reference, reference_of

DEFAULT_TOLERANCE = 0.02  # the band of a series whose run stored no reference
OFFERED_THROUGHPUTS = (SYSTEM_THROUGHPUT, OUTPUT_TOKEN_THROUGHPUT)


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

    def carry_over(self, candidate: SeriesData, reference: SeriesData) -> list[str]:
        """The carry-over check on the headline of interleaved series, said when found."""
        name = candidate.headline
        if self.pairs is None or name not in candidate.samples or \
                name not in reference.samples:
            return []
        cand, ref = candidate.samples[name].values, reference.samples[name].values
        found = carry_over(name, [cand[i] for i, _ in self.pairs.positions],
                           [ref[j] for _, j in self.pairs.positions], self.pairs.blocks)
        return [found.describe()] if found is not None and found.found else []


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
        if name in OFFERED_THROUGHPUTS and (candidate.at_offered_rate
                                            or reference.at_offered_rate):
            continue  # the rate LoadGen was asked to offer (vgpu.results.verdict.offered_rate)
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
    """Too few VALID repeats on a side; failing that, INVALID runs split unevenly."""
    notes = [note for data in series if (note := data.valid_shortfall) is not None]
    if not notes and len(series) == 2 and (split := invalid_split(*series)) is not None:
        notes.append(split)
    return notes


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
    offered = candidate.at_offered_rate or reference.at_offered_rate
    if kind == "scenario-vs-scenario":
        checks: list[Check] = []
        headline = candidate.headline
        if headline in candidate.samples and headline in reference.samples and not offered:
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
        if kind == "run-vs-baseline" and candidate.kind != "training" and not offered:
            checks += _instance_checks(candidate, reference, tolerance, pairing)
        title = (
            f"{candidate.workload}: VM vs bare metal, scenario {candidate.scenario_id}"
            if kind == "vm-vs-bare-metal"
            else f"{candidate.label} vs baseline {reference.label}"
        )
    # model llm's Server/Interactive: capacity at the SLO, judged by its own rule
    checks += capacity_checks(candidate, reference, per_metric, tolerance)
    if offered and not measured_capacity(candidate) and candidate.kind != "training":
        checks.append(offered_rate_check(candidate, reference))
    if candidate.looks:  # judged at the design's last look, as its looks were
        checks = [kept_at_look(c, at_look(c, candidate.looks, candidate.repeats_asked,
                                          ended_at=candidate.looks_ended_at))
                  for c in checks]
    shortfalls = _shortfalls(candidate, reference)
    if not shortfalls and pairing.pairs is not None:
        shortfalls += allowance_shortfall(candidate, reference, checks)
    return Comparison(
        kind=kind, title=title, candidate=candidate.label, reference=reference.label,
        checks=checks, platform_changes=platform_changes(candidate, reference),
        shortfalls=shortfalls,
        disturbed=[*candidate.disturbances, *reference.disturbances],
        confounded=pairing.carry_over(candidate, reference),
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


@dataclass(frozen=True)
class StoredVerdict:
    """A stored series judged: the comparison (None: nothing to judge against and no
    accuracy gate) and the reference it was judged against (None: none)."""

    comparison: Comparison | None
    reference: SeriesReference | None


def judge_stored(store: ResultStore, candidate: SeriesData,
                 tolerance: float = DEFAULT_TOLERANCE) -> StoredVerdict:
    """The one verdict of a stored series: against the reference of
    :func:`vgpu.results.verdict.referee.reference_of` (what its run stored), with that kind and
    those tolerances (``tolerance`` only for a series that stored none), plus the
    accuracy gate (vgpu.results.verdict.accuracy), which is judged with or without a reference."""
    return _against(store, candidate, reference_of(store, candidate, tolerance))


def comparison_at_look(store: ResultStore, candidate: SeriesData,
                       chosen: SeriesReference | None) -> Comparison | None:
    """A look at a series still running (a sequential design's look, not its verdict):
    the checks of :func:`judge_stored` at the repeats stored so far, against ``chosen``
    (its reference as chosen, not stored yet; None: none chosen). Writes nothing."""
    return _against(store, candidate,
                    reference_of(store, candidate, DEFAULT_TOLERANCE, chosen)).comparison


def _against(store: ResultStore, candidate: SeriesData,
             chosen: SeriesReference | None) -> StoredVerdict:
    if chosen is None:
        gate = with_accuracy_gate(None, candidate)
        return StoredVerdict(None if gate is None else
                       replace(gate, shortfalls=_shortfalls(candidate)), None)
    reference = load_series(store, chosen.reference_series)
    comparison = compare_series(
        cast(ComparisonKind, chosen.kind), candidate, reference, tolerance=chosen.tolerance,
        tolerances=chosen.tolerances, levels=levels_against(store, candidate, reference))
    return StoredVerdict(with_accuracy_gate(comparison, candidate), chosen)


def judge_stored_all(store: ResultStore, series: Sequence[SeriesData],
                     tolerance: float = DEFAULT_TOLERANCE) -> list[StoredVerdict]:
    """:func:`judge_stored` of each of ``series``; a series judged in one family with
    others (one `vgpu bench` of several workloads) is judged again in that family, all
    its members included, as the command that judged them did."""
    verdicts = [judge_stored(store, data, tolerance) for data in series]
    families = {v.reference.family for v in verdicts
                if v.reference is not None and v.reference.family}
    adjusted: dict[str, Comparison] = {}
    for family in families:
        members = [(series_id, judge_stored(store, load_series(store, series_id), tolerance))
                   for series_id in store.family(family)]
        judged = [(series_id, v.comparison) for series_id, v in members
                  if v.comparison is not None]
        adjusted |= dict(zip([s for s, _ in judged], one_family([c for _, c in judged]),
                             strict=True))
    return [replace(v, comparison=adjusted.get(data.series_id, v.comparison))
            for data, v in zip(series, verdicts, strict=True)]


def judged_as_one_family(store: ResultStore,
                         judged: Sequence[tuple[str, Comparison]]) -> list[Comparison]:
    """The comparisons of the series one command judged ((series id, comparison) each)
    as one family (vgpu.results.verdict.compare.one_family), the family stored with their
    references so that later verdicts (:func:`judge_stored_all`) make the same one."""
    if len(judged) > 1:
        store.set_family([series_id for series_id, _ in judged], uuid.uuid4().hex)
    return one_family([comparison for _, comparison in judged])


def judge_against_baseline(
    store: ResultStore, scenario: Scenario, candidate: SeriesData,
    run_command: str = "vgpu bench",
) -> tuple[Comparison | None, str]:
    """A series just run: its reference chosen from its scenario's baseline
    (:func:`vgpu.results.verdict.referee.choose_reference`) and stored with it, unless the
    series stored one already (the bench a revalidation ran), then judged
    by :func:`judge_stored_all` (in the family a command judged it in, once there is one);
    and the note saying which reference, or why there is none."""
    stored = store.series_reference(candidate.series_id)
    if stored is not None:
        note = stored.note
    else:
        chosen, note = choose_reference(store, scenario, candidate, run_command)
        if chosen is not None:
            store.put_series_reference(chosen)
    return judge_stored_all(store, [candidate])[0].comparison, note
