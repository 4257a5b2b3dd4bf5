"""Series of training repeats judged against the scenario's baseline through the judge that
inference uses (`vgpu.results.verdict.judge`), `vgpu compare` of training runs, the training
session both `vgpu train run` and `vgpu bench` call, and `vgpu train run` end to end on
this machine."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import vgpu.catalog
import vgpu.cli.train_view
import vgpu.train.session as session
from tests.cli.invoke import run_cli
from tests.results.series import QUIET, series_starts
from vgpu.cli import _register, app
from vgpu.model import load_scenario
from vgpu.model.scenario import Baseline, Scenario
from vgpu.results.store.records import RunStart, TargetKind
from vgpu.results.store.result_store import ResultStore
from vgpu.results.verdict import noise_store
from vgpu.site import Site
from vgpu.train.launch import TrainNode
from vgpu.train.records import store_training_record
from vgpu.train.scenario_runner import Overrides, TrainingRun
from vgpu.train.session import (
    CPU_CHECK,
    TrainingOutcome,
    WorkloadSeries,
    judge_series,
    run_training_bench,
)

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
WORKLOAD = "resnet50-train"



@pytest.fixture(autouse=True)
def _quiet_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """The classes here are calibrated quiet: these tests are about which series and
    metrics are judged, not the series level (tests/results/stats/test_noise.py)."""
    monkeypatch.setattr(noise_store, "levels_for", lambda *_: QUIET)

def _record(images_per_s: float, step_p99_s: float = 0.1, comm_share: float = 0.2,
            world: int = 4) -> dict[str, Any]:
    """A harness result record as `loadgen train` writes it (the fields the store reads)."""
    return {
        "status": "ok", "world_size": world, "settings": {"nodes": world},
        "totals": {"images_per_s": images_per_s, "wallclock_images_per_s": images_per_s * 0.9,
                   "step_time_s": {"p50": 0.09, "p99": step_p99_s}, "params_in_sync": True},
        "communication": {"measured": True, "share_mean": comm_share},
        "ranks": [{"rank": r, "images_per_s": images_per_s / world, "timed_start_unix": 100.0,
                   "timed_end_unix": 110.0} for r in range(world)],
        "device": {"kind": "gpu", "name": "A100"},
    }


def _store_series(store: ResultStore, series_id: str, scenario_id: str, values: Sequence[float],
                  target_kind: TargetKind, **record: float) -> list[int]:
    starts = series_starts(len(values), series_id=series_id, scenario_id=scenario_id,
                           scenario_name=scenario_id, workload=WORKLOAD,
                           target_kind=target_kind, kind="training")
    return [store_training_record(store, start, _record(value, **record), None)
            for start, value in zip(starts, values, strict=True)]


BARE_METAL = [10818.0, 10820.0, 10815.0]


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
        _store_series(store, "bm", "train_bm_4", BARE_METAL, "bare-metal")
        _store_series(store, "candidate", "train_multinode_4", vm, "vm")
        series = WorkloadSeries(WORKLOAD, "candidate")
        judge_series(store, scenario, series)
    comparison = series.comparison
    assert comparison is not None and comparison.verdict == verdict
    assert comparison.kind == "vm-vs-bare-metal"
    (check,) = comparison.checks
    assert check.metric == "throughput" and check.unit == "images/s"
    assert check.ratio == pytest.approx(sum(vm) / 3 / 10817.666, rel=1e-4)
    assert series.baseline_note == "scenario train_bm_4"


def test_only_the_throughput_of_a_training_series_is_judged(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "train_multinode_4.yaml")
    with ResultStore.open(tmp_path / "r.db") as store:
        _store_series(store, "bm", "train_bm_4", BARE_METAL, "bare-metal")
        # Same throughput; a slower p99 step and less time in communication describe the
        # run, they are not what the study judges.
        _store_series(store, "candidate", "train_multinode_4", BARE_METAL, "vm",
                      step_p99_s=0.5, comm_share=0.05)
        series = WorkloadSeries(WORKLOAD, "candidate")
        judge_series(store, scenario, series)
    assert series.comparison is not None
    assert [c.metric for c in series.comparison.checks] == ["throughput"]
    assert series.comparison.verdict == "PASS"


def test_a_local_run_is_judged_on_training_throughput(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "train_multinode_4.yaml")
    with ResultStore.open(tmp_path / "r.db") as store:
        _store_series(store, "bm", "train_bm_4", BARE_METAL, "local")
        _store_series(store, "candidate", "train_multinode_4", [9500.0, 9510.0, 9490.0],
                      "local")
        series = WorkloadSeries(WORKLOAD, "candidate")
        judge_series(store, scenario, series)
    assert series.comparison is not None and series.comparison.kind == "scenario-vs-scenario"
    assert [c.metric for c in series.comparison.checks] == ["throughput"]
    assert series.comparison.verdict == "FAIL"


def test_a_named_baseline_is_the_reference(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "train_multinode_4.yaml").model_copy(
        update={"baseline": Baseline(reference_run="golden-4")})
    with ResultStore.open(tmp_path / "r.db") as store:
        (golden, *_) = _store_series(store, "golden", "train_multinode_4", [9500.0, 9510.0,
                                                                            9490.0], "vm")
        _store_series(store, "bm", "train_bm_4", BARE_METAL, "bare-metal")
        _store_series(store, "candidate", "train_multinode_4", [9505.0, 9500.0, 9495.0], "vm")
        unset = WorkloadSeries(WORKLOAD, "candidate")
        judge_series(store, scenario, unset)
        store.set_baseline(golden, "golden-4")
        series = WorkloadSeries(WORKLOAD, "candidate")
        judge_series(store, scenario, series)
    assert unset.comparison is None and "baseline 'golden-4' is not set" in unset.baseline_note
    assert series.baseline_note == "baseline 'golden-4'"
    assert series.comparison is not None and series.comparison.kind == "run-vs-baseline"
    assert series.comparison.verdict == "PASS"  # not the bare-metal series: 12% faster


def test_missing_baseline_says_what_to_run(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "train_multinode_4.yaml")
    with ResultStore.open(tmp_path / "r.db") as store:
        _store_series(store, "candidate", "train_multinode_4", [1.0, 2.0], "vm")
        series = WorkloadSeries(WORKLOAD, "candidate")
        judge_series(store, scenario, series)
    assert series.comparison is None
    assert "vgpu train run --scenario train_bm_4" in series.baseline_note


def test_a_series_without_an_ok_repeat_has_no_verdict(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "train_multinode_4.yaml")
    with ResultStore.open(tmp_path / "r.db") as store:
        series = WorkloadSeries(WORKLOAD, "nothing-stored")
        judge_series(store, scenario, series)
    assert series.comparison is None and series.baseline_note == "no repeat finished ok"


def test_compare_judges_a_training_run_against_a_named_baseline(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with ResultStore.open(db) as store:
        (golden, *_) = _store_series(store, "golden", "train_bm_4", BARE_METAL, "bare-metal")
        (near, *_) = _store_series(store, "near", "train_multinode_4",
                                   [10675.0, 10690.0, 10660.0], "vm", step_p99_s=0.5)
        (far, *_) = _store_series(store, "far", "train_multinode_4",
                                  [9500.0, 9510.0, 9490.0], "vm")
    code, out, err = run_cli(["baseline", "set", str(golden), "--name", "bm4", "--db", str(db)])
    assert code == 0, err
    assert "'bm4'" in out and "3 ok run(s)" in out
    code, out, err = run_cli(["compare", str(near), "--baseline", "bm4", "--db", str(db),
                              "--json"])
    assert code == 0, err
    result = json.loads(out)
    assert result["kind"] == "run-vs-baseline" and result["verdict"] == "PASS"
    assert [c["metric"] for c in result["checks"]] == ["throughput"]
    code, out, err = run_cli(["compare", str(far), "--baseline", "bm4", "--db", str(db)])
    assert code == 3, out + err
    assert "verdict: FAIL" in out and "throughput" in out


def _fake_launch(values: list[float], seen: list[Overrides | None]) -> Any:
    """Stands in for torchrun: stores the next throughput as the harness's record."""

    def run(scenario: Scenario, targets: Sequence[TrainNode] | None, out_dir: Path, *,
            store: ResultStore, series_id: str, repeat_index: int, target_kind: TargetKind,
            overrides: Overrides | None, workloads: Sequence[str]) -> list[TrainingRun]:
        seen.append(overrides)
        start = RunStart(series_id=series_id, scenario_id=scenario.id,
                         scenario_name=scenario.name, workload=workloads[0],
                         target_kind=target_kind, repeat_index=repeat_index, kind="training")
        record = _record(values.pop(0))
        run_id = store_training_record(store, start, record, None)
        return [TrainingRun(workloads[0], record, out_dir, run_id, ["gloo used on CPU"])]

    return run


def test_training_bench_runs_stores_and_judges(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Overrides | None] = []
    monkeypatch.setattr(session, "run_training_scenario",
                        _fake_launch([10675.0, 10690.0, 10660.0], seen))
    monkeypatch.setattr(session, "local_gpu_count", lambda: 0)
    scenario = load_scenario(SCENARIOS / "train_multinode_4.yaml")
    with ResultStore.open(tmp_path / "r.db") as store:
        _store_series(store, "bm", "train_bm_4", BARE_METAL, "local")
        outcome = run_training_bench(scenario, Site(), store, runs=3)
        (series,) = outcome.series
        assert len(store.runs(series_id=series.series_id, status="ok")) == 3
    assert seen == [CPU_CHECK] * 3  # no GPU here: the functional check
    assert outcome.failure is None and not outcome.verdict_failed
    assert series.comparison is not None and series.comparison.verdict == "PASS"


def test_bench_of_a_training_scenario_resolves_it_once_and_runs_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Scenario, Site, int | None, bool]] = []
    resolved: list[str] = []
    resolve = vgpu.catalog.resolve

    def counting_resolve(ref: str) -> Path:
        resolved.append(ref)
        return resolve(ref)

    def fake_bench(scenario: Scenario, site: Site, store: ResultStore, *,
                   runs: int | None, full_models: bool, **_: object) -> TrainingOutcome:
        calls.append((scenario, site, runs, full_models))
        return TrainingOutcome(scenario, [])

    monkeypatch.setattr(vgpu.catalog, "resolve", counting_resolve)
    monkeypatch.setattr(vgpu.cli.train_view, "run_training_bench", fake_bench)
    code, out, err = run_cli(["bench", "-s", "train_multinode_2", "--runs", "2",
                              "--full-models", "--db", str(tmp_path / "r.db")])
    assert code == 0, out + err
    assert resolved == ["train_multinode_2"]
    ((scenario, site, runs, full_models),) = calls
    assert (scenario.id, site.inventory_path, runs, full_models) == (
        "train_multinode_2", None, 2, True)


@pytest.mark.parametrize(
    ("record", "code", "message"),
    [({"status": "failed", "reason": "rank 1 died"}, 1, "resnet50-train: rank 1 died"),
     (_record(9500.0), 3, "verdict FAIL against the baseline")],
)
def test_train_run_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              record: dict[str, Any], code: int, message: str) -> None:
    scenario = load_scenario(SCENARIOS / "train_multinode_4.yaml")
    db = tmp_path / "r.db"
    with ResultStore.open(db) as store:
        _store_series(store, "bm", "train_bm_4", BARE_METAL, "vm")
        _store_series(store, "candidate", "train_multinode_4", [9500.0, 9510.0], "vm")
        series = WorkloadSeries(WORKLOAD, "candidate",
                                runs=[TrainingRun(WORKLOAD, record, tmp_path, None)])
        judge_series(store, scenario, series)

    monkeypatch.setattr(vgpu.cli.train_view, "run_training_bench",
                        lambda *_a, **_k: TrainingOutcome(scenario, [series]))
    got, out, err = run_cli(["train", "run", "-s", "train_multinode_4", "--db", str(db)])
    assert got == code, out + err
    assert message in err


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
