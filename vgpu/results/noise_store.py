"""Noise levels per class, read from and written to the store: the class of a series is
its host class (target kind, GPU model, profiles, workload as run, runtime), so a VM's
series and its bare-metal twin on the same kind of device are judged with the noise
their kind of device shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from vgpu.results.calibration import host_class
from vgpu.results.noise import NoiseLevels, estimate_levels, uncalibrated, with_metrics
from vgpu.results.platforms import series_platform
from vgpu.results.series import SeriesData
from vgpu.results.store import ResultStore


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
