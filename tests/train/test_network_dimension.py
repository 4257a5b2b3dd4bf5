"""The network as a scenario dimension: the `network` field and its errors, the training
models a scenario may name, the platform record and the scaling table's link column, and
the allreduce probe stored by `vgpu train probe` on this machine."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from vgpu.cli import _register, app
from vgpu.errors import InputError
from vgpu.model import load_scenario
from vgpu.model.scenario import TrainingNetwork
from vgpu.remote.local import LocalTransport
from vgpu.results.store.records import Metric, Platform, RunStart
from vgpu.results.store.result_store import ResultStore
from vgpu.results.views.allreduce_view import size_label
from vgpu.train.launch import TrainNode
from vgpu.train.network import network_options, training_platform
from vgpu.train.probe import probe_metrics
from vgpu.train.report import build_scaling_report, render_scaling_report

REPO = Path(__file__).resolve().parents[2]


def _scenario_file(tmp_path: Path, **changes: object) -> Path:
    data = yaml.safe_load((REPO / "scenarios" / "train_multinode_2.yaml").read_text())
    data.update(changes)
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_network_is_read_with_its_rdma_kind(tmp_path: Path) -> None:
    scenario = load_scenario(_scenario_file(
        tmp_path, network={"speed_gbps": 25, "rdma": "ib", "interface": "ib0"}))
    assert scenario.network is not None and scenario.network.speed_gbps == 25
    options = network_options(scenario.network, TrainingNetwork())
    assert (options.interface, options.rdma) == ("ib0", True)
    assert network_options(scenario.network, TrainingNetwork(interface="ens1")).interface \
        == "ens1"


@pytest.mark.parametrize(("network", "field", "words"), [
    ({"speed_gbps": 100, "rdma": "iwarp"}, "network.rdma", "use one of the listed values"),
    ({"speed_gbps": "fast"}, "network.speed_gbps", "speed_gbps: 100"),
    ({"speed_gbps": 0}, "network.speed_gbps", "greater than 0"),
    ({"rdma": "roce"}, "network.speed_gbps", "add 'speed_gbps'"),
])
def test_bad_network_names_file_field_and_fix(
    tmp_path: Path, network: dict[str, object], field: str, words: str,
) -> None:
    with pytest.raises(InputError) as caught:
        load_scenario(_scenario_file(tmp_path, network=network))
    text = str(caught.value)
    assert "scenario.yaml" in text and field in text and words in text


def test_rdma_workload_on_a_network_without_rdma_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"workloads\[0\]\.network\.rdma is true.*roce or ib"):
        load_scenario(_scenario_file(tmp_path, network={"speed_gbps": 25, "rdma": "none"}))


def test_bert_training_is_refused_at_load_with_a_fix(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO / "scenarios" / "train_multinode_2.yaml").read_text())
    data["workloads"][0]["model"] = "bert"
    path = tmp_path / "bert.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    text = str(caught.value)
    assert "bert.yaml" in text and "workloads[0].model" in text
    assert "no trainer for model 'bert'" in text and "kind: inference" in text


def test_platform_records_the_link_only_where_nodes_were_crossed() -> None:
    scenario = load_scenario(REPO / "scenarios" / "train_multinode_2_25gbe.yaml")
    assert training_platform(scenario, None).link_speed_gbps is None  # one machine
    node = TrainNode(name="node-1", shell=LocalTransport(), address="10.0.0.11", workdir="/w")
    remote = training_platform(scenario, [node])
    assert (remote.link_speed_gbps, remote.rdma) == (25.0, "roce")


def test_probe_metrics_follow_nccl_tests() -> None:
    record = {"world_size": 4, "rows": [
        {"size_bytes": 1 << 20, "time_us": 100.0, "algbw_gb_s": 10.0, "busbw_gb_s": 15.0},
        {"size_bytes": 1 << 26, "time_us": 900.0, "algbw_gb_s": 20.0, "busbw_gb_s": 30.0},
    ]}
    metrics = {(m.name, m.instance): m.value for m in probe_metrics(record)}
    assert metrics[("busbw_peak", None)] == 30.0 and metrics[("busbw_avg", None)] == 22.5
    assert metrics[("busbw", "64MiB")] == 30.0 and size_label(4096) == "4KiB"


def _store(store: ResultStore, scenario: str, nodes: int, value: float,
           speed: float | None) -> None:
    detail = {"workload_name": "resnet50-train", "nodes": nodes, "model": "resnet50"}
    platform = Platform(link_speed_gbps=speed, rdma="roce") if speed else None
    start = RunStart(series_id=scenario, scenario_id=scenario, scenario_name=scenario,
                     workload="resnet50-train", target_kind="vm", kind="training",
                     workload_detail=detail, platform=platform)
    store.record_run(start, "ok", metrics=[Metric("throughput", value, "images/s")])


def test_scaling_table_shows_the_link_beside_each_row(tmp_path: Path) -> None:
    with ResultStore.open(tmp_path / "results.db") as store:
        _store(store, "n1", 1, 2757.21, None)
        _store(store, "n2", 2, 5391.75, 100)
        _store(store, "n4", 4, 10675.09, 100)
        _store(store, "n4_25g", 4, 9500.0, 25)
        text = render_scaling_report(build_scaling_report(store, ["n1", "n2", "n4"]))
        with pytest.raises(InputError, match="crossed different links"):
            build_scaling_report(store, ["n1", "n2", "n4_25g"])
    rows = text.splitlines()
    assert "link" in rows[0] and rows[1].rstrip().endswith("-")
    assert "3.87x" in rows[3] and rows[3].rstrip().endswith("100 Gbit/s RDMA roce")


@pytest.mark.train
@pytest.mark.slow
def test_cli_probe_of_a_scenario_is_stored_and_shown(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the train extra (torch) is not installed")
    _register()
    db = tmp_path / "results.db"
    result = CliRunner().invoke(app, [
        "train", "probe", "-s", "train_multinode_2", "--size", "65536", "--size", "1048576",
        "--iterations", "2", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "busbw GB/s" in result.output and "1MiB" in result.output
    with ResultStore.open(db) as store:
        (run,) = store.runs(scenario_id="train_multinode_2")
        names = {(m.name, m.instance) for m in store.metrics(run.id)}
    assert run.kind == "allreduce" and ("busbw", "1MiB") in names
    assert ("busbw_peak", None) in names
