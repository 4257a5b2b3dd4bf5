"""Series of training repeats judged against the scenario's baseline, and `vgpu train run`
end to end on this machine."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from vgpu.cli import _register, app
from vgpu.model import load_scenario
from vgpu.results.records import Metric, RunStart
from vgpu.results.store import ResultStore
from vgpu.train.session import WorkloadSeries, judge_against_baseline

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _ok_record(images_per_s: float) -> dict[str, object]:
    return {"status": "ok", "totals": {"images_per_s": images_per_s}}


def _series_with(values: list[float]) -> WorkloadSeries:
    from vgpu.train.bench import TrainingRun

    series = WorkloadSeries("resnet50-train", "candidate")
    series.runs = [TrainingRun("resnet50-train", _ok_record(v), Path("."), None) for v in values]
    return series


def _store_baseline(store: ResultStore, values: list[float]) -> None:
    for index, value in enumerate(values):
        start = RunStart(series_id="bm", scenario_id="train_bm_4", scenario_name="bm",
                         workload="resnet50-train", target_kind="bare-metal",
                         repeat_index=index, kind="training")
        store.record_run(start, "ok", metrics=[Metric("throughput", value, "images/s")])


@pytest.mark.parametrize(
    ("vm", "verdict"),
    [
        ([10675.0, 10690.0, 10660.0], "PASS"),  # 1.3% below bare metal, tight repeats
        ([9500.0, 9510.0, 9490.0], "FAIL"),  # 12% below
        ([10675.0, 9800.0, 11500.0], "INCONCLUSIVE"),  # noise wider than the 2% band
    ],
)
def test_vm_series_is_judged_against_its_bare_metal_counterpart(
    tmp_path: Path, vm: list[float], verdict: str
) -> None:
    scenario = load_scenario(SCENARIOS / "train_multinode_4.yaml")  # baseline: train_bm_4
    with ResultStore.open(tmp_path / "r.db") as store:
        _store_baseline(store, [10818.0, 10820.0, 10815.0])
        series = _series_with(vm)
        judge_against_baseline(store, scenario, series)
    assert series.check is not None and series.check.verdict == verdict
    assert series.check.ratio == pytest.approx(sum(vm) / 3 / 10817.666, rel=1e-4)
    assert series.baseline_note == "against scenario train_bm_4"


def test_missing_baseline_says_what_to_run(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "train_multinode_4.yaml")
    with ResultStore.open(tmp_path / "r.db") as store:
        series = _series_with([1.0, 2.0])
        judge_against_baseline(store, scenario, series)
    assert series.check is None
    assert "vgpu train run --scenario train_bm_4" in series.baseline_note


@pytest.mark.train
@pytest.mark.slow
def test_train_run_command_stores_and_prints(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the train extra (torch) is not installed")
    _register()
    db = tmp_path / "results.db"
    result = CliRunner().invoke(
        app, ["train", "run", "-s", "train_multinode_2", "--runs", "1", "--db", str(db)]
    )
    assert result.exit_code == 0, result.output
    assert "resnet50-train" in result.output and "no verdict" in result.output
    assert "gloo used on CPU" in result.output
    with ResultStore.open(db) as store:
        (run,) = store.runs(scenario_id="train_multinode_2", kind="training")
        assert run.status == "ok" and run.workload_detail["world_size"] == 2
        assert run.workload_detail["model"] == "resnet-tiny"  # the CPU functional check
