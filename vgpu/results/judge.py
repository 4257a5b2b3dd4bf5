"""Builds the three kinds of comparison from stored series: VM vs bare metal, scenario vs
scenario, run vs baseline (series or reference values)."""

from __future__ import annotations

from collections.abc import Mapping

from vgpu.results.compare import (
    Band,
    Check,
    Comparison,
    ComparisonKind,
    Reference,
    band_for,
    check_reference,
    compare_samples,
)
from vgpu.results.series import SYSTEM_THROUGHPUT, WORST_P99, SeriesData


def _shared_checks(
    candidate: SeriesData, reference: SeriesData, tolerances: Mapping[str, float],
    default_tolerance: float, metrics: list[str] | None = None,
) -> list[Check]:
    names = metrics or [n for n in candidate.samples if n in reference.samples]
    checks = []
    for name in names:
        if name not in candidate.samples or name not in reference.samples:
            continue
        if name == WORST_P99 and not candidate.latency_matters:
            continue  # Offline latency is the whole batch's wait, not a service level
        sample = candidate.samples[name]
        band = band_for(sample.higher_is_better, tolerances.get(name, default_tolerance))
        checks.append(compare_samples(
            name, sample.values, reference.samples[name].values, band, sample.unit
        ))
    return checks


def compare_series(
    kind: ComparisonKind,
    candidate: SeriesData,
    reference: SeriesData,
    *,
    tolerance: float,
    tolerances: Mapping[str, float] | None = None,
    min_gain: float | None = None,
) -> Comparison:
    """``vm-vs-bare-metal`` and ``run-vs-baseline`` judge every shared metric (throughput
    may not drop, latency may not rise, beyond its tolerance). ``scenario-vs-scenario``
    judges system throughput: the gain must be at least ``min_gain`` (default
    -tolerance, i.e. not worse)."""
    per_metric = dict(tolerances or {})
    if kind == "scenario-vs-scenario":
        checks: list[Check] = []
        if SYSTEM_THROUGHPUT in candidate.samples and SYSTEM_THROUGHPUT in reference.samples:
            floor = -tolerance if min_gain is None else min_gain
            checks.append(compare_samples(
                SYSTEM_THROUGHPUT, candidate.samples[SYSTEM_THROUGHPUT].values,
                reference.samples[SYSTEM_THROUGHPUT].values,
                Band(lower_pct=floor * 100.0), "samples/s",
            ))
        title = f"scenario {candidate.scenario_id} vs scenario {reference.scenario_id}"
    else:
        checks = _shared_checks(candidate, reference, per_metric, tolerance)
        title = (
            f"{candidate.workload}: VM vs bare metal, scenario {candidate.scenario_id}"
            if kind == "vm-vs-bare-metal"
            else f"{candidate.label} vs baseline {reference.label}"
        )
    return Comparison(
        kind=kind, title=title, candidate=candidate.label, reference=reference.label,
        checks=checks,
    )


def compare_with_references(
    candidate: SeriesData, references: Mapping[str, Reference], reference_label: str
) -> Comparison:
    """Run vs baseline given as reference data (value, lower, upper, unit) per metric."""
    checks = [
        check_reference(name, candidate.samples[name].values, ref)
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
    )


def default_kind(candidate: SeriesData, reference: SeriesData) -> ComparisonKind:
    """Picks the comparison a pair of series implies."""
    if reference.target_kind == "bare-metal" and candidate.target_kind == "vm":
        return "vm-vs-bare-metal"  # a VM scenario and its bare-metal twin differ in id
    if candidate.scenario_id != reference.scenario_id:
        return "scenario-vs-scenario"
    return "run-vs-baseline"
