"""Real torchrun + Gloo on this machine: the scenario runner trains a tiny ResNet with 1, 2
and 4 ranks, stores each run, and the scaling report is built from the stored runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the train extra (torch) is not installed")

from vgpu.model import load_scenario
from vgpu.results.store.result_store import ResultStore
from vgpu.train.report import (
    build_scaling_report,
    render_scaling_report,
    store_scaling_report,
)
from vgpu.train.scenario_runner import Overrides, TrainingRun, run_training_scenario

pytestmark = [pytest.mark.train, pytest.mark.slow]

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
NODE_COUNTS = (1, 2, 4)
TINY = Overrides(batch_per_gpu=4, image_size=16, model="resnet-tiny", steps=5, warmup_steps=1)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[ResultStore, dict[int, TrainingRun]]:
    """The tiny training runs of the 1, 2 and 4 node scenarios, stored once for the module
    (runs on this machine, not a lab)."""
    root = tmp_path_factory.mktemp("training")
    store = ResultStore.open(root / "results.db")
    runs: dict[int, TrainingRun] = {}
    for nodes in NODE_COUNTS:
        scenario = load_scenario(SCENARIOS / f"train_multinode_{nodes}.yaml")
        (run,) = run_training_scenario(
            scenario, None, root / scenario.id, store=store, overrides=TINY
        )
        runs[nodes] = run
    yield store, runs
    store.close()


@pytest.mark.parametrize("ranks", [2, 4])
def test_all_ranks_end_with_identical_parameters(
    trained: tuple[ResultStore, dict[int, TrainingRun]], ranks: int
) -> None:
    record = trained[1][ranks].record
    assert record["status"] == "ok", record.get("reason")
    assert record["world_size"] == ranks and record["backend"] == "gloo"
    digests = {rank["param_digest"] for rank in record["ranks"]}
    assert len(digests) == 1 and record["totals"]["params_in_sync"] is True
    assert sorted(rank["rank"] for rank in record["ranks"]) == list(range(ranks))


@pytest.mark.parametrize("ranks", NODE_COUNTS)
def test_total_throughput_is_the_sum_over_ranks(
    trained: tuple[ResultStore, dict[int, TrainingRun]], ranks: int
) -> None:
    record = trained[1][ranks].record
    per_rank = [rank["images_per_s"] for rank in record["ranks"]]
    assert len(per_rank) == ranks and all(value > 0 for value in per_rank)
    assert record["totals"]["images_per_s"] == pytest.approx(sum(per_rank))
    for rank in record["ranks"]:  # images/s = batch x steps / summed step time
        steps = rank["step_time_s"]
        assert rank["images_per_s"] == pytest.approx(4 / steps["mean"], rel=1e-9)
        assert steps["count"] == 5 and steps["min"] <= steps["p50"] <= steps["p99"]
    assert record["device"]["note"] == "CPU: no GPU/MIG slice used"
    # A world of one trains the bare model: there is no allreduce whose cost to measure.
    assert record["communication"]["measured"] is (ranks > 1)
    assert "comm_backend nccl needs GPUs: gloo used on CPU" in record["notes"]


def test_stored_run_holds_rank_instances_and_metrics(
    trained: tuple[ResultStore, dict[int, TrainingRun]],
) -> None:
    store, runs = trained
    run_id = runs[4].run_id
    assert run_id is not None
    stored = store.run(run_id)
    assert stored is not None and stored.kind == "training" and stored.status == "ok"
    assert stored.workload_detail["nodes"] == 4 and stored.workload_detail["world_size"] == 4
    instances = store.instances(run_id)
    assert [i.result.name for i in instances] == ["rank0", "rank1", "rank2", "rank3"]
    metrics = {m.name: m.value for m in store.metrics(run_id) if m.instance is None}
    assert metrics["throughput"] == pytest.approx(
        sum(i.result.throughput or 0.0 for i in instances)
    )
    assert metrics["params_in_sync"] == 1.0


def test_scaling_report_is_computed_from_stored_runs_and_stored_back(
    trained: tuple[ResultStore, dict[int, TrainingRun]],
) -> None:
    store, runs = trained
    report = build_scaling_report(store, [f"train_multinode_{n}" for n in NODE_COUNTS])
    totals = {n: runs[n].record["totals"]["images_per_s"] for n in NODE_COUNTS}
    assert [row.nodes for row in report.rows] == list(NODE_COUNTS)
    for row in report.rows:
        assert row.speedup == pytest.approx(totals[row.nodes] / totals[1])
        assert row.efficiency == pytest.approx(totals[row.nodes] / (row.nodes * totals[1]))
    store_scaling_report(store, report)
    run_id = runs[4].run_id
    assert run_id is not None
    stored = {m.name: m.value for m in store.metrics(run_id) if m.instance is None}
    assert stored["scaling_efficiency"] == pytest.approx(report.rows[2].efficiency)
    assert stored["speedup"] == pytest.approx(report.rows[2].speedup)
    text = render_scaling_report(report)
    assert f"{report.rows[2].efficiency * 100:.1f}%" in text


def test_torchrun_leaves_no_process_behind(
    trained: tuple[ResultStore, dict[int, TrainingRun]],
) -> None:
    node_dir = trained[1][4].out_dir / "node"
    assert not (node_dir / "launch.pid").exists()
    assert (node_dir / "out" / "result.json").exists()
    assert sys.executable  # the ranks ran under this interpreter's torch
