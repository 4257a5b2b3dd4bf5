"""Constructed results: a series of repeats stored as the bench and train commands store
theirs, for the tests of the store, the verdicts and the reports (of every folder).

    stored = record_series(store, [Repeat([instance("a", 100.0)]), Repeat([instance("a", 101.0)])],
                           scenario_id="bm6", target_kind="bare-metal")
    stored.series_id, stored.run_ids

A test that stores its repeats another way (a training record) takes the starts alone:
``series_starts(3, kind="training")``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu.results.stats.noise import NoiseLevels
from vgpu.results.store.records import InstanceResult, Metric, Platform, RunStart, TargetKind
from vgpu.results.store.result_store import ResultStore

WORKLOAD = "resnet50/tiny onnxruntime Offline"

# Series noise small enough that repeats decide: for tests of the repeat-level mechanics
# (the series level has its own tests in stats/test_noise.py).
QUIET = NoiseLevels(repeat_cv=0.001, series_cv=0.0, series_df=100.0, series=50, repeats=150)

AddSeries = Callable[..., list[int]]
"""The ``add_series`` fixture of tests/results: stores one ok run per repeat and returns
the runs' ids."""


def instance(name: str, throughput: float, p99_ms: float = 5.0, **changes: Any
             ) -> InstanceResult:
    """A valid CPU instance at ``throughput`` samples/s whose latency percentiles scale with
    ``p99_ms``; ``changes`` replace any other field."""
    fields: dict[str, Any] = dict(
        name=name, status="ok", device_kind="cpu", device_note="CPU, no MIG slice",
        validity="VALID", throughput=throughput,
        latency_ns={"p50": p99_ms * 0.5e6, "p90": p99_ms * 0.8e6, "p95": p99_ms * 0.9e6,
                    "p97": p99_ms * 0.95e6, "p99": p99_ms * 1e6, "p99_9": p99_ms * 1.2e6,
                    "min": p99_ms * 0.1e6, "max": p99_ms * 1.5e6, "mean": p99_ms * 0.6e6},
        timed_start_unix=1000.0, timed_end_unix=1010.0, result={"status": "ok"},
    )
    return InstanceResult(**{**fields, **changes})


@dataclass(frozen=True)
class Repeat:
    """One stored run of a series: what its instances and the run itself measured."""

    instances: Sequence[InstanceResult] = ()
    metrics: Sequence[Metric] = ()
    status: str = "ok"
    reason: str | None = None
    sync_skew_s: float | None = None


@dataclass(frozen=True)
class StoredSeries:
    series_id: str
    run_ids: list[int] = field(default_factory=list)


def series_starts(repeats: int, *, series_id: str | None = None, scenario_id: str = "6",
                  scenario_name: str | None = None, workload: str = WORKLOAD,
                  target_kind: TargetKind | str = "vm", kind: str = "inference",
                  workload_detail: dict[str, Any] | None = None,
                  platform: Platform | None = None, scenario_file: str | None = None,
                  ) -> list[RunStart]:
    """The starts of ``repeats`` runs of one series (a fresh id unless ``series_id``);
    the scenario is named ``s<id>`` unless ``scenario_name``."""
    series = series_id if series_id is not None else uuid.uuid4().hex
    return [RunStart(series_id=series, scenario_id=scenario_id,
                     scenario_name=scenario_name if scenario_name is not None
                     else f"s{scenario_id}",
                     workload=workload, target_kind=target_kind,  # type: ignore[arg-type]
                     repeat_index=index, kind=kind, scenario_file=scenario_file,
                     workload_detail=dict(workload_detail or {}), platform=platform)
            for index in range(repeats)]


def record_series(store: ResultStore, repeats: Sequence[Repeat], **start: Any
                  ) -> StoredSeries:
    """Stores one run per repeat, in order; ``start`` is what series_starts takes."""
    series_id = start.pop("series_id", None) or uuid.uuid4().hex
    starts = series_starts(len(repeats), series_id=series_id, **start)
    run_ids = [store.record_run(s, r.status, reason=r.reason, instances=r.instances,
                                metrics=r.metrics, sync_skew_s=r.sync_skew_s)
               for s, r in zip(starts, repeats, strict=True)]
    return StoredSeries(series_id, run_ids)
