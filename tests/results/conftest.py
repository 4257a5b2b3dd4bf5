"""Builders of constructed results for the results tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from tests.labs.postgres import postgres_lab, postgres_url  # noqa: F401 (fixtures)
from vgpu.results.noise import NoiseLevels
from vgpu.results.records import InstanceResult, Metric, RunStart
from vgpu.results.store import ResultStore

AddSeries = Callable[..., list[int]]


@pytest.fixture
def store(tmp_path: Path) -> ResultStore:
    with ResultStore.open(tmp_path / "results.db") as opened:
        yield opened


def _instance(name: str, throughput: float, p99_ms: float) -> InstanceResult:
    return InstanceResult(
        name=name, status="ok", device_kind="cpu", device_note="CPU, no MIG slice",
        validity="VALID", throughput=throughput,
        latency_ns={"p50": p99_ms * 0.5e6, "p90": p99_ms * 0.8e6, "p95": p99_ms * 0.9e6,
                    "p97": p99_ms * 0.95e6, "p99": p99_ms * 1e6, "p99_9": p99_ms * 1.2e6,
                    "min": p99_ms * 0.1e6, "max": p99_ms * 1.5e6, "mean": p99_ms * 0.6e6},
        timed_start_unix=1000.0, timed_end_unix=1010.0, result={"status": "ok"},
    )


@pytest.fixture
def add_series(store: ResultStore) -> AddSeries:
    """Stores one ok run per repeat; ``repeats`` lists per-instance throughputs."""

    def add(
        repeats: Sequence[dict[str, float]],
        *,
        scenario_id: str = "6",
        workload: str = "resnet50/tiny onnxruntime Offline",
        target_kind: str = "vm",
        loadgen_scenario: str = "Offline",
        p99_ms: float = 5.0,
        metrics: Sequence[Sequence[Metric]] = (),
        kind: str = "inference",
        scenario_file: str | None = None,
    ) -> list[int]:
        series_id = uuid.uuid4().hex
        run_ids = []
        for index, per_instance in enumerate(repeats):
            start = RunStart(
                series_id=series_id, scenario_id=scenario_id, scenario_name=f"s{scenario_id}",
                workload=workload, target_kind=target_kind, repeat_index=index, kind=kind,
                workload_detail={"loadgen_scenario": loadgen_scenario},
                scenario_file=scenario_file,
            )
            run_ids.append(store.record_run(
                start, "ok",
                instances=[_instance(n, t, p99_ms) for n, t in per_instance.items()],
                metrics=metrics[index] if metrics else (),
                sync_skew_s=0.002,
            ))
        return run_ids

    return add


# Series noise small enough that repeats decide: for tests of the repeat-level mechanics
# (the series level has its own tests in test_noise.py).
QUIET = NoiseLevels(repeat_cv=0.001, series_cv=0.0, series_df=100.0, series=50, repeats=150)
