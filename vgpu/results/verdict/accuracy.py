"""The accuracy gate: a workload with an accuracy target FAILs when any instance of any
repeat measured less than its threshold, or measured nothing, whatever its throughput.

Each harness record carries ``accuracy`` (docs/harness.md): the metric (top-1 or span
agreement with the fp32 CPU reference, or top-1 on a dataset), its value, the target and
the threshold the value must reach. The gate is one check added to the workload's
comparison (or the whole comparison when there is no baseline to compare with)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from vgpu.results.stats.intervals import summarize
from vgpu.results.store.series import SeriesData
from vgpu.results.verdict.compare import Band, Check, Comparison

ACCURACY_CHECK = "accuracy"
ACCURACY_REFERENCE = "accuracy target"


@dataclass(frozen=True)
class InstanceAccuracy:
    """One instance's accuracy pass in one repeat (value None: it reported none)."""

    run_id: int
    instance: str
    metric: str
    value: float | None
    threshold: float
    target: float
    samples: int
    labels_from: str

    @property
    def passed(self) -> bool:
        return self.value is not None and self.value >= self.threshold

    def describe(self) -> str:
        where = f"{self.instance} (run {self.run_id})"
        if self.value is None:
            return f"{where} reported no accuracy"
        relation = ">=" if self.passed else "<"
        return (f"{where} {self.metric} {self.value:.4f} {relation} {self.threshold:.4f} "
                f"(target {self.target:g}, {self.samples} samples, labels "
                f"{self.labels_from})")


def _target(series: SeriesData) -> float | None:
    for run in series.runs:
        accuracy = run.workload_detail.get("accuracy") or {}
        if accuracy.get("target") is not None:
            return float(accuracy["target"])
    return None


def _instance_accuracy(run_id: int, instance: str, accuracy: Mapping[str, Any] | None,
                       target: float | None) -> InstanceAccuracy | None:
    if accuracy is None or accuracy.get("target") is None:
        if target is None:
            return None
        return InstanceAccuracy(run_id, instance, "accuracy", None, target, target, 0, "-")
    value = accuracy.get("value")
    return InstanceAccuracy(
        run_id=run_id, instance=instance, metric=str(accuracy.get("metric")),
        value=None if value is None else float(value),
        threshold=float(accuracy.get("threshold", accuracy["target"])),
        target=float(accuracy["target"]), samples=int(accuracy.get("samples") or 0),
        labels_from=str(accuracy.get("labels_from")),
    )


def instance_accuracies(series: SeriesData) -> list[InstanceAccuracy]:
    """Every instance's accuracy in every repeat of the series; empty when the workload
    has no accuracy target, and for a training series (its instances hold training
    ranks' records, not the inference harness's)."""
    if series.kind != "inference":
        return []
    target = _target(series)
    found = []
    for run_id, stored in series.instances.items():
        for inst in stored:
            accuracy = _instance_accuracy(run_id, inst.result.name, inst.result.run_result.accuracy,
                                          target)
            if accuracy is not None:
                found.append(accuracy)
    return found


def accuracy_check(series: SeriesData) -> Check | None:
    """PASS when every instance reached its threshold in every repeat, else FAIL naming
    the instances below it with their measured values; None without a target."""
    found = instance_accuracies(series)
    if not found:
        return None
    failing = [a for a in found if not a.passed]
    worst = min(found, key=lambda a: -1.0 if a.value is None else a.value - a.threshold)
    if failing:
        reason = (f"{len(failing)} of {len(found)} instance runs below the accuracy target: "
                  + "; ".join(a.describe() for a in failing))
    else:
        reason = f"all {len(found)} instance runs reach the target; lowest: {worst.describe()}"
    values = [a.value for a in found if a.value is not None] or [0.0]
    worst_value = 0.0 if worst.value is None else worst.value
    return Check(
        metric=ACCURACY_CHECK, unit=worst.metric, candidate=summarize(values),
        reference_mean=worst.threshold, reference=None,
        difference_pct=(worst_value - worst.threshold) / worst.threshold * 100.0,
        ci_pct=None, mdd_pct=None, band=Band(lower_pct=0.0),
        verdict="FAIL" if failing else "PASS", reason=reason,
    )


def with_accuracy_gate(comparison: Comparison | None, series: SeriesData) -> Comparison | None:
    """``comparison`` with the accuracy check added; a comparison of the gate alone when
    there was none (no baseline); unchanged without an accuracy target."""
    check = accuracy_check(series)
    if check is None:
        return comparison
    if comparison is None:
        return Comparison(kind="run-vs-baseline", title=f"{series.label}: accuracy gate",
                          candidate=series.label, reference=ACCURACY_REFERENCE,
                          checks=[check])
    return replace(comparison, checks=[*comparison.checks, check])
