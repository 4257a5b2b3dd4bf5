"""The Triton parts of a bench without a server: each instance's spec points at its
host's server, the server-side split of a record becomes metrics of that instance, the
summary shows it, and the command line checks --triton-url / --triton-image."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.cli.invoke import run_cli
from vgpu.bench.collect import server_split_metrics
from vgpu.bench.fanout import InstanceOutcome
from vgpu.bench.outcome import WorkloadOutcome
from vgpu.bench.summary import split_table
from vgpu.bench.workload import BenchOverrides, effective_workload, harness_spec
from vgpu.model.scenario import InferenceWorkload
from vgpu.remote.local import LocalTransport
from vgpu.targets.target import Target

TRITON = InferenceWorkload(name="r", model="resnet50", variant="tiny", backend="triton",
                           batch=8)


def _record(queue_us: float | None) -> dict[str, Any]:
    part = {"count": 10, "ns": 1000, "mean_us": queue_us}
    timed = {k: dict(part) for k in ("queue", "compute_input", "compute_infer",
                                     "compute_output")}
    timed["compute_infer"]["mean_us"] = 700.0
    return {"backend": {"server_statistics": {"timed_run": timed}}}


def _outcome(record: dict[str, Any] | None, tmp_path: Path) -> InstanceOutcome:
    target = Target(instance="s6-1g", transport=LocalTransport(), harness="python -m loadgen",
                    work_root=str(tmp_path), device={"kind": "cpu"}, device_label="CPU",
                    target_kind="local")
    return InstanceOutcome(target=target, log_dir=tmp_path, record=record)


def test_each_instance_is_pointed_at_its_hosts_server_unless_a_url_is_given() -> None:
    deployed = effective_workload(TRITON, on_cpu=True, overrides=BenchOverrides())
    assert deployed.deploys_triton
    deployed.triton_urls = {"a": "127.0.0.1:18001", "b": "127.0.0.1:28001"}
    spec = harness_spec(deployed, instance="b", device={"kind": "cpu"}, threads=1)
    assert spec.backend.url == "127.0.0.1:28001"
    given = effective_workload(TRITON, on_cpu=True,
                               overrides=BenchOverrides(triton_url="10.0.0.5:8001"))
    assert not given.deploys_triton
    assert harness_spec(given, instance="a", device={"kind": "cpu"},
                        threads=1).backend.url == "10.0.0.5:8001"
    assert given.detail()["triton"] == {"url": "10.0.0.5:8001", "deployed": False}


def test_the_server_side_split_becomes_instance_metrics(tmp_path: Path) -> None:
    metrics = server_split_metrics(_outcome(_record(120.0), tmp_path))
    assert {(m.name, m.value, m.unit, m.instance) for m in metrics} == {
        ("triton_queue_us", 120.0, "us", "s6-1g"),
        ("triton_compute_input_us", 120.0, "us", "s6-1g"),
        ("triton_compute_infer_us", 700.0, "us", "s6-1g"),
        ("triton_compute_output_us", 120.0, "us", "s6-1g")}
    unread = server_split_metrics(_outcome(_record(None), tmp_path))
    assert [m.name for m in unread] == ["triton_compute_infer_us"]
    assert server_split_metrics(_outcome({"backend": {"name": "onnxruntime"}}, tmp_path)) == []
    assert server_split_metrics(_outcome(None, tmp_path)) == []


def test_the_summary_shows_the_split_per_instance() -> None:
    outcome = WorkloadOutcome(workload=effective_workload(TRITON, True, BenchOverrides()),
                              series_id="x", server_split={"s6-1g": {
                                  "queue": 10.0, "compute_input": 2.0,
                                  "compute_infer": 300.0, "compute_output": 4.0}})
    console = Console(width=200, record=True)
    console.print(split_table(outcome))
    text = console.export_text()
    assert "Triton server-side time per request" in text
    assert "s6-1g" in text and "300" in text and "316" in text


@pytest.mark.parametrize(("args", "message"), [
    (["--triton-url", "http://h:8001"], "--triton-url: 'http://h:8001' is not HOST:PORT"),
    (["--triton-url", "h:8001", "--triton-image", "x"],
     "--triton-image: nothing is deployed with --triton-url"),
    (["--docker-host", "unix:///x.sock"], "--docker-host: applies only to --runtime container"),
])
def test_triton_options_are_checked_before_anything_runs(
        tmp_path: Path, args: list[str], message: str) -> None:
    code, _out, err = run_cli(["bench", "--scenario", "6", "--db", str(tmp_path / "r.db"),
                               *args])
    assert code == 2
    assert message in " ".join(err.split())
    assert not (tmp_path / "r.db").exists()
