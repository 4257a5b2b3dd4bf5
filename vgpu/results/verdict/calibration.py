"""References calibrated from golden runs: the stored series of one host class (target
kind x GPU model x MIG/vGPU profile x workload x runtime) pooled into mean, spread and n
per headline metric, written as a file another lab can judge against with the same
two-sample statistics (Welch on the summaries) as a stored baseline."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from vgpu.errors import InputError
from vgpu.results.stats.intervals import Summary, minimum_detectable_difference, summarize
from vgpu.results.stats.noise import NoiseLevels, uncalibrated
from vgpu.results.store.records import Platform
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SeriesData, load_series
from vgpu.results.verdict.compare import Comparison, band_for, compare_summaries
from vgpu.results.verdict.platforms import series_platform, series_platforms

FORMAT_VERSION = 1
MATCH_KEYS = ("target_kind", "gpu", "profile", "workload", "runtime")


@dataclass(frozen=True)
class CalibratedReference:
    """One host class's reference for one metric."""

    target_kind: str
    gpu: str
    profile: str
    workload: str
    runtime: str
    metric: str
    unit: str
    mean: float
    stdev: float
    n: int
    series: int
    platform: dict[str, str | None]

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(getattr(self, name) for name in MATCH_KEYS)

    def summary(self) -> Summary:
        return Summary(n=self.n, mean=self.mean, stdev=self.stdev, half_width=None,
                       mdd=minimum_detectable_difference(self.stdev, self.n))


def host_class(series: SeriesData) -> tuple[str, ...]:
    """The series' (target kind, GPU model, profiles, workload, runtime)."""
    platforms = series_platforms(series)
    gpus = sorted({p.gpu or "CPU" for p in platforms}) or ["CPU"]
    profiles = sorted(_instance_profiles(series).values())
    runtimes = sorted({p.runtime or "host" for p in platforms}) or ["host"]
    return (series.target_kind, "+".join(gpus), "+".join(profiles) or "whole",
            series.workload, "+".join(runtimes))


def _instance_profiles(series: SeriesData) -> dict[str, str]:
    """Instance name -> its MIG or vGPU profile ("whole" for none): one entry per
    instance, however many repeats the series has; a series whose records are only its
    runs' gives one entry per distinct profile."""
    found = {inst.result.name: _profile(inst.result.platform)
             for stored in series.instances.values() for inst in stored
             if inst.result.platform is not None}
    return found or {p: p for p in {_profile(r.platform) for r in series.runs
                                    if r.platform is not None}}


def _profile(platform: Platform) -> str:
    return platform.mig_profile or platform.vgpu_profile or "whole"


def calibrate(store: ResultStore, scenario_ids: Sequence[str] | None = None,
              ) -> list[CalibratedReference]:
    """Every ok inference series (of the given scenarios) grouped by host class; per
    group and headline metric the repeats of all its series pooled."""
    groups: dict[tuple[str, ...], list[SeriesData]] = defaultdict(list)
    for series_id in _series_ids(store, scenario_ids):
        data = load_series(store, series_id)
        if data.kind == "inference" and data.headline in data.samples:
            groups[host_class(data)].append(data)
    return [_pooled(key, members) for key, members in sorted(groups.items())
            if sum(len(m.samples[m.headline].values) for m in members) >= 2]


def _series_ids(store: ResultStore, scenario_ids: Sequence[str] | None) -> list[str]:
    runs = [r for r in store.runs(status="ok")
            if not scenario_ids or r.scenario_id in scenario_ids]
    return list(dict.fromkeys(r.series_id for r in runs))


def _pooled(key: tuple[str, ...], members: list[SeriesData]) -> CalibratedReference:
    headline = members[0].headline
    values = [v for m in members for v in m.samples[headline].values]
    summary = summarize(values)
    fields = dict(zip(MATCH_KEYS, key, strict=True))
    return CalibratedReference(
        **fields, metric=headline, unit=members[0].samples[headline].unit,
        mean=summary.mean, stdev=summary.stdev or 0.0, n=summary.n, series=len(members),
        platform=series_platform(members[-1]))


def write_references(references: Sequence[CalibratedReference], path: Path) -> None:
    data = {"version": FORMAT_VERSION,
            "references": [asdict(r) for r in references]}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def is_calibrated(data: Any) -> bool:
    return isinstance(data, dict) and "references" in data and "version" in data


def parse_references(data: Any, source: str) -> list[CalibratedReference]:
    """The references of a calibrated file, or InputError naming the entry and field."""
    if data.get("version") != FORMAT_VERSION:
        raise InputError.single(source, "version", f"unknown version {data.get('version')!r}",
                                fix=f"write it with `vgpu baseline calibrate` (version "
                                    f"{FORMAT_VERSION})")
    entries = data.get("references")
    if not isinstance(entries, list):
        raise InputError.single(source, "references", "must be a list",
                                fix="write it with `vgpu baseline calibrate`")
    return [_entry(item, f"references[{k}]", source) for k, item in enumerate(entries)]


def _entry(item: Any, where: str, source: str) -> CalibratedReference:
    fix = "write it with `vgpu baseline calibrate`"
    if not isinstance(item, dict):
        raise InputError.single(source, where, "must be a mapping", fix=fix)
    try:
        reference = CalibratedReference(**{**item, "platform": dict(item.get("platform")
                                                                    or {})})
    except TypeError as exc:
        raise InputError.single(source, where, f"not a calibrated reference: {exc}",
                                fix=fix) from None
    if not (reference.n >= 2 and reference.stdev >= 0 and math.isfinite(reference.mean)
            and reference.mean > 0):
        raise InputError.single(source, f"{where}.n/mean/stdev",
                                "needs n >= 2, a positive mean and stdev >= 0", fix=fix)
    return reference


def compare_calibrated(series: SeriesData, references: Sequence[CalibratedReference],
                       source: str, tolerance: float,
                       levels: NoiseLevels | None = None) -> Comparison:
    """The series judged against the reference of its host class, or InputError saying
    which classes the file has; the difference carries the series level of ``levels``
    (default: the stated uncalibrated one)."""
    key = host_class(series)
    match = next((r for r in references if r.key == key and r.metric in series.samples),
                 None)
    if match is None:
        known = "; ".join(" / ".join(r.key) for r in references) or "none"
        raise InputError.single(source, "references", "no reference for "
                                f"{' / '.join(key)}", fix=f"the file has: {known}")
    sample = series.samples[match.metric]
    check = compare_summaries(match.metric, summarize(sample.values), match.summary(),
                              band_for(sample.higher_is_better, tolerance), match.unit,
                              levels or uncalibrated(series.throughput_cv or 0.0))
    return Comparison(kind="run-vs-baseline",
                      title=f"{series.label} vs calibrated reference ({match.series} "
                            f"series, n={match.n})",
                      candidate=series.label, reference=f"{source} ({' / '.join(key)})",
                      checks=[check], disturbed=series.disturbances)
