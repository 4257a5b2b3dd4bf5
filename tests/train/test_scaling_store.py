"""The scaling report read from a real results store, filled with constructed runs that
reproduce lab study B's table; and `vgpu train scaling` on that store."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from vgpu.cli import _register, app
from vgpu.errors import InputError
from vgpu.results.store.records import Metric, RunStart
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import TRAINING_THROUGHPUT, load_series
from vgpu.train.report import build_scaling_report, store_scaling_report

STUDY_VM = {1: 2757.21, 2: 5391.75, 4: 10675.09}
STUDY_BARE_METAL_4 = 10818.0


def _detail(nodes: int, **changes: object) -> dict[str, object]:
    detail: dict[str, object] = {
        "workload_name": "resnet50-train", "nodes": nodes, "world_size": nodes,
        "gpus_per_node": 1, "model": "resnet50", "image_size": 224, "batch_per_gpu": 1024,
        "precision": "fp16", "backend": "nccl", "device": "gpu",
    }
    detail.update(changes)
    return detail


def _store_run(
    store: ResultStore, scenario_id: str, nodes: int, value: float, series: str,
    target_kind: str = "vm", **changes: object,
) -> int:
    start = RunStart(
        series_id=series, scenario_id=scenario_id, scenario_name=scenario_id,
        workload="resnet50-train", target_kind=target_kind,  # type: ignore[arg-type]
        kind="training", workload_detail=_detail(nodes, **changes),
    )
    return store.record_run(start, "ok", metrics=[
        Metric("throughput", value, "images/s"),
        Metric("throughput", value / nodes, "images/s", instance="rank0"),
    ])


@pytest.fixture
def store(tmp_path: Path) -> ResultStore:
    opened = ResultStore.open(tmp_path / "results.db")
    for nodes, value in STUDY_VM.items():
        _store_run(opened, f"train_multinode_{nodes}", nodes, value, f"vm{nodes}")
    for nodes in (1, 2, 4):
        value = STUDY_BARE_METAL_4 if nodes == 4 else STUDY_VM[nodes] * 1.01
        _store_run(opened, f"train_bm_{nodes}", nodes, value, f"bm{nodes}", "bare-metal")
    return opened


def test_report_from_stored_runs_reproduces_the_study(store: ResultStore) -> None:
    report = build_scaling_report(
        store, ["train_multinode_4", "train_multinode_1", "train_multinode_2"],
        ["train_bm_1", "train_bm_2", "train_bm_4"],
    )
    assert [round(r.speedup, 2) for r in report.rows] == [1.0, 1.96, 3.87]
    assert [round(r.efficiency * 100, 1) for r in report.rows] == [100.0, 97.8, 96.8]
    ratio_4 = next(p.ratio for p in report.platform_rows if p.nodes == 4)
    assert ratio_4 == pytest.approx(10675.09 / 10818.0)  # within 2% of bare metal
    assert {p.check.verdict for p in report.platform_rows} == {"INCONCLUSIVE"}  # 1 repeat


def test_report_is_stored_on_the_runs(store: ResultStore) -> None:
    report = build_scaling_report(store, [f"train_multinode_{n}" for n in (1, 2, 4)])
    store_scaling_report(store, report)
    (run_4,) = report.run_ids[4]
    stored = {m.name: m.value for m in store.metrics(run_4)}
    assert stored["speedup"] == pytest.approx(10675.09 / 2757.21)
    assert stored["scaling_efficiency"] == pytest.approx(10675.09 / (4 * 2757.21))


def test_latest_series_and_repeats_are_used(store: ResultStore) -> None:
    for value in (2700.0, 2800.0):  # a newer 1-node series with two repeats
        _store_run(store, "train_multinode_1", 1, value, "vm1-new")
    report = build_scaling_report(store, [f"train_multinode_{n}" for n in (1, 2)])
    assert report.rows[0].throughput.mean == 2750.0 and report.rows[0].throughput.n == 2
    assert report.rows[1].speedup == pytest.approx(5391.75 / 2750.0)
    assert load_series(store, "vm1-new").samples[TRAINING_THROUGHPUT].values == [2700.0, 2800.0]


def test_scenarios_differing_in_more_than_nodes_are_refused(store: ResultStore) -> None:
    _store_run(store, "train_other_2", 2, 5000.0, "other", batch_per_gpu=256)
    with pytest.raises(InputError, match=r"differs from .* in \['batch_per_gpu'\]"):
        build_scaling_report(store, ["train_multinode_1", "train_other_2"])


def test_missing_scenario_names_the_command_to_run(store: ResultStore) -> None:
    with pytest.raises(InputError, match="vgpu train run --scenario train_multinode_8"):
        build_scaling_report(store, ["train_multinode_1", "train_multinode_8"])


def test_cli_prints_and_stores_the_table(store: ResultStore, tmp_path: Path) -> None:
    store.close()
    _register()
    args = ["train", "scaling", "--db", str(tmp_path / "results.db")]
    for nodes in (1, 2, 4):
        args += ["-s", f"train_multinode_{nodes}", "-b", f"train_bm_{nodes}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "3.87x" in result.output and "96.8%" in result.output
    assert "0.9868" in result.output  # VM / bare metal at 4 nodes
    with ResultStore.open(tmp_path / "results.db") as reopened:
        names = {m.name for run in reopened.runs(scenario_id="train_multinode_2")
                 for m in reopened.metrics(run.id)}
    assert {"speedup", "scaling_efficiency", "vm_vs_bare_metal"} <= names
