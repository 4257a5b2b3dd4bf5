"""Noise levels per class, read from and written to the store: the class of a series is
its host class (target kind, GPU model, profiles, workload as run, runtime), so a VM's
series and its bare-metal twin on the same kind of device are judged with the noise
their kind of device shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from vgpu.results.stats.noise import NoiseLevels, estimate_levels, uncalibrated, with_metrics
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SeriesData
from vgpu.results.verdict.calibration import host_class
from vgpu.results.verdict.platforms import series_platform


def class_key(series: SeriesData) -> str:
    return " / ".join(host_class(series))


def levels_for(store: ResultStore, series: SeriesData) -> NoiseLevels:
    """The newest calibration of ``series``' class for its headline, or the stated
    uncalibrated default (with the series' own repeat CV), carrying the class's own
    calibration of every other metric of the series (a latency is not a throughput;
    ``NoiseLevels.for_metric``)."""
    key = class_key(series)
    stored = store.noise(key, series.headline)
    headline = stored if stored is not None else uncalibrated(series.throughput_cv or 0.0)
    others = {name: found for name in series.samples if name != series.headline
              and (found := store.noise(key, name)) is not None}
    return with_metrics(replace(headline, metric=series.headline), others)


def calibrate_series(store: ResultStore, members: Sequence[SeriesData]) -> NoiseLevels:
    """Estimate the class's levels from ``members`` (series of one configuration, one
    class) and store them; ValueError when they are of different classes or too few."""
    keys = {class_key(m) for m in members}
    if len(keys) != 1:
        raise ValueError(f"series of different classes cannot be pooled: {sorted(keys)}")
    headline = members[0].headline
    newest = max(run.started_at for m in members for run in m.runs)
    key = keys.pop()
    platform = {k: v for k, v in series_platform(members[-1]).items() if v is not None}
    ids = [m.series_id for m in members]
    levels = estimate_levels([m.samples[headline].values for m in members
                              if headline in m.samples], measured_at=newest, source=key)
    store.save_noise(key, headline, levels, ids, platform)
    for name in members[0].samples:  # each metric its own levels, where it can be estimated
        values = [m.samples[name].values for m in members if name in m.samples]
        if name == headline or len(values) < 2:
            continue
        try:
            store.save_noise(key, name, estimate_levels(values, measured_at=newest,
                                                        source=key), ids, platform)
        except ValueError:  # a metric that averages zero or has one repeat per series
            continue
    return levels


def levels_against(store: ResultStore, series: SeriesData,
                   reference: SeriesData) -> NoiseLevels:
    """The levels a comparison of ``series`` with ``reference`` is judged with: per
    metric, the spread of the series ``reference`` was captured from when it is a
    baseline that stored one (:func:`store_baseline_spread`), else :func:`levels_for`
    (the class calibration, else the uncalibrated default)."""
    fallback = levels_for(store, series)
    own = {name: found for name in series.samples
           if (found := store.baseline_noise(reference.series_id, name)) is not None}
    headline = own.get(series.headline)
    if headline is None and not own:
        return fallback
    others = {name: own.get(name) or fallback.for_metric(name) for name in series.samples
              if name != series.headline}
    first = replace(headline, metric=series.headline) if headline is not None else fallback
    return with_metrics(first, others)


def store_baseline_spread(store: ResultStore, baseline: SeriesData,
                          members: Sequence[SeriesData]) -> NoiseLevels | None:
    """Estimate the spread between ``members`` (the series of one configuration a
    baseline was captured from, ``baseline`` among them) per metric and store it with
    ``baseline``; the headline's levels, or None when there are too few series (fewer
    than 2, or no series with 2 repeats) to estimate one."""
    ids = [m.series_id for m in members]
    newest = max(run.started_at for m in members for run in m.runs)
    found: NoiseLevels | None = None
    for name in baseline.samples:
        values = [m.samples[name].values for m in members if name in m.samples]
        if len(values) != len(members):
            continue
        try:
            levels = estimate_levels(values, measured_at=newest,
                                     source=f"baseline {baseline.series_id}")
        except ValueError:  # one series, one repeat each, or a metric that averages 0
            continue
        store.save_baseline_noise(baseline.series_id, name, levels, ids)
        if name == baseline.headline:
            found = store.baseline_noise(baseline.series_id, name)
    return found
