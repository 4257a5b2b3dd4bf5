"""A stored workload's identity comes from its stored detail, never from its key: the
name a report, a named baseline and the pacing show is the scenario file's workload name,
and a training run's key is its name."""

from __future__ import annotations

from pathlib import Path

from vgpu.bench.workload import BenchOverrides, effective_workload
from vgpu.model.scenario import InferenceWorkload
from vgpu.results.store.records import RunStart, WorkloadIdentity
from vgpu.results.store.result_store import ResultStore


def test_an_inference_run_reads_back_its_identity(tmp_path: Path) -> None:
    workload = InferenceWorkload(name="bert-server", model="bert", scenario="Server",
                                 target_qps=20.0, batch=4, precision="fp16")
    effective = effective_workload(workload, on_cpu=True, overrides=BenchOverrides())
    with ResultStore.open(tmp_path / "r.db") as store:
        run_id = store.begin_run(RunStart(
            series_id="s1", scenario_id="6", scenario_name="mixed", workload=effective.key,
            target_kind="local", workload_detail=effective.detail()))
        run = store.run(run_id)
    assert run is not None and run.workload.startswith("bert-server (bert/")
    assert run.identity == WorkloadIdentity(
        name="bert-server", model="bert", variant=effective.variant, precision="fp16",
        scenario="Server", batch=4, backend="onnxruntime")


def test_a_run_without_a_stored_label_is_named_by_its_key() -> None:
    training = WorkloadIdentity.of("resnet-tiny-ddp", {"kind": "training", "batch": "x"})
    assert training == WorkloadIdentity(name="resnet-tiny-ddp")
