"""The results store of a results test, and the series it stores there
(tests/results/series.py builds them)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.labs.postgres import postgres_lab, postgres_url  # noqa: F401 (fixtures)
from tests.results.series import WORKLOAD, AddSeries, Repeat, instance, record_series
from vgpu.results.store.records import Metric
from vgpu.results.store.result_store import ResultStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ResultStore]:
    with ResultStore.open(tmp_path / "results.db") as opened:
        yield opened


@pytest.fixture
def add_series(store: ResultStore) -> AddSeries:
    """Stores one ok run per repeat; ``repeats`` lists per-instance throughputs."""

    def add(
        repeats: Sequence[dict[str, float]],
        *,
        scenario_id: str = "6",
        workload: str = WORKLOAD,
        target_kind: str = "vm",
        loadgen_scenario: str = "Offline",
        p99_ms: float = 5.0,
        metrics: Sequence[Sequence[Metric]] = (),
        kind: str = "inference",
        scenario_file: str | None = None,
    ) -> list[int]:
        runs = [Repeat(instances=[instance(n, t, p99_ms) for n, t in per_instance.items()],
                       metrics=metrics[index] if metrics else (), sync_skew_s=0.002)
                for index, per_instance in enumerate(repeats)]
        return record_series(
            store, runs, scenario_id=scenario_id, workload=workload, target_kind=target_kind,
            kind=kind, workload_detail={"loadgen_scenario": loadgen_scenario},
            scenario_file=scenario_file).run_ids

    return add
