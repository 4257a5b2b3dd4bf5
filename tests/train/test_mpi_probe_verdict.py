"""The MPI probe of a VM scenario judged against its bare-metal twin's: the reference chosen
from the scenario's baseline, kind vm-vs-bare-metal on the probes' busbw, stored with the
series so that `vgpu report` shows the same verdict."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.results.series import Repeat, record_series
from vgpu.model.load import load_scenario
from vgpu.results.store.records import Metric, Platform
from vgpu.results.store.result_store import ResultStore
from vgpu.results.views.report import build_report
from vgpu.train.mpi_probe import MPI_PROBE_WORKLOAD
from vgpu.train.mpi_probe_session import judge_probe_series

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _probe_series(store: ResultStore, scenario: str, target: str,
                  busbw_peaks: list[float]) -> str:
    """Repeats stored as `vgpu train mpi-probe` stores them (run-level busbw metrics)."""
    runs = [Repeat(metrics=[
        Metric("busbw_peak", peak, "GB/s"), Metric("busbw_avg", peak * 0.6, "GB/s"),
        Metric("busbw_link_share", peak / 1.25, "ratio")]) for peak in busbw_peaks]
    return record_series(
        store, runs, series_id=uuid.uuid4().hex[:12], scenario_id=scenario,
        scenario_name=scenario, workload=MPI_PROBE_WORKLOAD, target_kind=target,
        kind="allreduce", workload_detail={"backend": "mpi", "world_size": 2, "nodes": 2},
        platform=Platform(link_speed_gbps=10.0, rdma="none")).series_id


def test_vm_probe_below_its_bare_metal_twin_fails_and_the_report_says_so(
        tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "train_mpi_2.yaml")
    with ResultStore.open(tmp_path / "results.db") as store:
        _probe_series(store, "train_mpi_bm_2", "bare-metal", [1.20, 1.21, 1.19, 1.20])
        vm = _probe_series(store, "train_mpi_2", "vm", [0.96, 0.97, 0.95, 0.96])
        comparison, note = judge_probe_series(store, scenario, vm)
        report = build_report(store)
    assert note == "scenario train_mpi_bm_2"
    assert comparison is not None and comparison.kind == "vm-vs-bare-metal"
    checks = {check.metric: check for check in comparison.checks}
    assert set(checks) == {"busbw_peak", "busbw_avg", "busbw_link_share"}
    assert checks["busbw_peak"].difference_pct == pytest.approx(-20.0, abs=0.1)
    assert comparison.verdict == "FAIL"
    (verdicts,) = [s for h, s in report.sections if h == "Verdict: VM vs bare metal"]
    (row,) = [r for r in verdicts.rows if r[0] == "train_mpi_2"]
    assert row[1:4] == [MPI_PROBE_WORKLOAD, "vm", "train_mpi_bm_2 bare-metal"]
    assert row[4:6] == ["0.960 GB/s", "1.20 GB/s"] and row[9] == "FAIL"


def test_a_vm_probe_without_a_bare_metal_probe_has_no_verdict_and_says_what_to_run(
        tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "train_mpi_2.yaml")
    with ResultStore.open(tmp_path / "results.db") as store:
        vm = _probe_series(store, "train_mpi_2", "vm", [0.96, 0.97])
        comparison, note = judge_probe_series(store, scenario, vm)
    assert comparison is None
    assert "no ok run of baseline scenario train_mpi_bm_2 with workload mpi-probe" in note
    assert "`vgpu train mpi-probe --scenario train_mpi_bm_2`" in note
