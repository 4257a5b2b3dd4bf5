"""Real MLPerf LoadGen driving the ONNX Runtime SUT (tiny ResNet50 and tiny BERT) in all
four scenarios; values come from LoadGen's own detail log."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from loadgen.models import build_model, read_model_io
from loadgen.result import schema_problems
from loadgen.runner import run
from loadgen.spec import parse_spec
from loadgen.sync import READY_LINE
from tests.loadgen.harness_helpers import ROOT, base_spec, run_cli

PERCENTILE_ORDER = ("min", "p50", "p90", "p95", "p97", "p99", "p99.9", "max")

# Short runs: each scenario's targets are set so LoadGen generates enough queries for
# its minimum duration on a slow 2-core machine without running much past it.
SCENARIOS: dict[str, dict[str, dict[str, Any]]] = {
    "resnet50": {
        "Offline": {"target_qps": 4000},
        "Server": {"target_qps": 300, "target_latency_ms": 200},
        "SingleStream": {"target_latency_ms": 0.05},
        "MultiStream": {"target_latency_ms": 0.1, "samples_per_query": 4},
    },
    "bert": {
        "Offline": {"target_qps": 300},
        "Server": {"target_qps": 40, "target_latency_ms": 500},
        "SingleStream": {"target_latency_ms": 1},
        "MultiStream": {"target_latency_ms": 2, "samples_per_query": 2},
    },
}


def run_spec(model_cache: Path, out: Path, model: str, scenario: str,
             **loadgen: Any) -> dict[str, Any]:
    doc = base_spec(model_cache, model={"name": model, "variant": "tiny"})
    doc["loadgen"] = {"scenario": scenario, "min_duration_ms": 500, "min_query_count": 8,
                      "performance_sample_count": 32, **loadgen}
    record = run(parse_spec(doc, "spec.json", out.parent), out)
    assert json.loads((out / "result.json").read_text()) == json.loads(
        json.dumps(record, default=str))
    return record


def assert_latencies_ordered(latency: dict[str, int]) -> None:
    values = [latency[k] for k in PERCENTILE_ORDER]
    assert all(isinstance(v, int) and v > 0 for v in values)
    assert values == sorted(values)
    assert latency["min"] <= latency["mean"] <= latency["max"]


@pytest.mark.parametrize("model", ["resnet50", "bert"])
@pytest.mark.parametrize("scenario", ["Offline", "Server", "SingleStream", "MultiStream"])
def test_scenario_runs_and_reports_loadgen_values(model_cache: Path, tmp_path: Path,
                                                  model: str, scenario: str) -> None:
    record = run_spec(model_cache, tmp_path / "out", model, scenario,
                      **SCENARIOS[model][scenario])
    assert record["status"] == "ok", record["reason"]
    assert schema_problems(record) == []
    assert record["scenario"] == scenario and record["mode"] == "PerformanceOnly"
    assert record["loadgen_version"].startswith("6.")
    assert record["throughput"]["samples_per_second"] > 0
    assert_latencies_ordered(record["latency_ns"])
    assert record["query_count"] >= (1 if scenario == "Offline" else 8)
    per_query = {"Offline": record["settings"]["samples_per_query"], "MultiStream": 4 if
                 model == "resnet50" else 2}.get(scenario, 1)
    assert record["samples_per_query"] == per_query
    assert record["sample_count"] == record["query_count"] * per_query
    # Every sample LoadGen issued went through the SUT, in batches of at most 4.
    assert record["sut"]["completed_samples"] == record["sample_count"]
    assert record["sut"]["failed_samples"] == 0
    assert record["sut"]["batches"] >= record["sample_count"] / 4
    assert record["validity"]["result"] in ("VALID", "INVALID")
    if record["validity"]["result"] == "INVALID":
        assert record["validity"]["reasons"]
    assert record["device"]["execution_provider"] == "CPUExecutionProvider"
    assert record["device"]["note"] == "CPU: no GPU/MIG slice used"
    assert record["timed_start_unix"] < record["timed_end_unix"]
    duration = record["timed_end_unix"] - record["timed_start_unix"]
    if record["validity"]["min_duration_met"]:
        assert duration >= 0.5
    host = record["telemetry"]["host"]
    assert 0 < host["process_cpu_seconds_timed"] <= duration * host["cpu_count"] + 0.05
    assert record["loadgen_errors"] == []
    assert (tmp_path / "out" / "mlperf_log_summary.txt").exists()
    if scenario == "MultiStream":
        assert_latencies_ordered(record["query_latency_ns"])
    if scenario == "SingleStream" and record["query_count"] >= 64:
        # LoadGen's early-stopping estimate of the 90th percentile needs 64 queries.
        assert record["early_stopping"]["latency_ss"] > 0


@pytest.mark.slow
def test_offline_validity_follows_loadgen(model_cache: Path, tmp_path: Path) -> None:
    ok = run_spec(model_cache, tmp_path / "valid", "resnet50", "Offline",
                  min_duration_ms=200, target_qps=60000, min_query_count=1)
    assert ok["validity"] == {"result": "VALID", "reasons": [], "min_duration_met": True,
                              "min_queries_met": True, "perf_constraints_met": None,
                              "early_stopping_met": True}
    assert ok["timed_end_unix"] - ok["timed_start_unix"] >= 0.2
    # LoadGen sizes the single Offline query from the expected QPS: 1.1 x qps x duration.
    assert ok["sample_count"] == ok["settings"]["min_sample_count"] == 13200
    short = run_spec(model_cache, tmp_path / "invalid", "resnet50", "Offline",
                     min_duration_ms=300, target_qps=10, min_query_count=1)
    assert short["validity"]["result"] == "INVALID"
    assert short["validity"]["min_duration_met"] is False
    assert "Increase expected QPS so the loadgen pre-generates a larger (coalesced) query." in \
        short["validity"]["reasons"]


def test_server_with_impossible_latency_bound_is_invalid(model_cache: Path,
                                                         tmp_path: Path) -> None:
    record = run_spec(model_cache, tmp_path / "out", "resnet50", "Server",
                      target_qps=200, target_latency_ms=0.001)
    assert record["status"] == "ok"
    assert record["settings"]["target_latency_ns"] == 1000
    validity = record["validity"]
    assert validity["result"] == "INVALID"
    assert validity["perf_constraints_met"] is False
    assert "Reduce target QPS to improve latency." in validity["reasons"]
    assert record["overlatency_query_count"] == record["query_count"]
    assert record["latency_ns"]["min"] > 1000


def test_accuracy_mode_reports_top1(model_cache: Path, tmp_path: Path) -> None:
    path = build_model("resnet50", "tiny", "fp32", model_cache)
    images = np.random.default_rng(3).standard_normal((40, 3, 32, 32), dtype=np.float32)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    predicted = session.run(None, {"input": images})[0].argmax(axis=1)
    labels = predicted.copy()
    labels[:10] = (labels[:10] + 1) % 10  # a quarter of the labels disagree
    np.savez(tmp_path / "val.npz", input=images, labels=labels)
    doc = base_spec(model_cache, dataset="val.npz")
    doc["loadgen"].update(mode="AccuracyOnly", performance_sample_count=16)
    record = run(parse_spec(doc, "spec.json", tmp_path), tmp_path / "out")
    assert record["status"] == "ok", record["reason"]
    assert record["mode"] == "AccuracyOnly"
    assert record["accuracy"]["samples"] == 40
    assert record["accuracy"]["metric"] == "top1"
    assert record["accuracy"]["value"] == pytest.approx(0.75)
    assert record["accuracy"]["labels_from"] == f"dataset:{tmp_path / 'val.npz'}"
    assert record["throughput"] is None or record["throughput"]["samples_per_second"] is None


def test_user_onnx_model_runs_through_the_same_path(model_cache: Path, tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    weights = helper.make_tensor("w", TensorProto.FLOAT, [6, 3],
                                 np.linspace(-1, 1, 18).astype(np.float32).tolist())
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["features", "w"], ["scores"])], "user",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["n", 6])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n", 3])], [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "mine.onnx"))
    doc = base_spec(model_cache, model={"name": "mine.onnx", "input_names": ["features"]})
    record = run(parse_spec(doc, "spec.json", tmp_path), tmp_path / "out")
    assert record["status"] == "ok", record["reason"]
    assert record["model"]["builtin"] is False
    assert record["model"]["inputs"] == [{"name": "features", "dtype": "float32",
                                          "shape": [None, 6]}]
    assert record["throughput"]["samples_per_second"] > 0


def test_gpu_request_without_gpu_provider_fails_with_exit_1(
        write_spec: Callable[..., Path], tmp_path: Path) -> None:
    if set(ort.get_available_providers()) & {"CUDAExecutionProvider",
                                             "TensorrtExecutionProvider"}:
        pytest.skip("gpu: this onnxruntime has a GPU provider")
    spec = write_spec(device={"kind": "mig", "uuid": "MIG-0b9e4a5c-1111-2222-3333-444455556666"})
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    assert result.returncode == 1
    record = json.loads((tmp_path / "out" / "result.json").read_text())
    assert record["status"] == "failed"
    assert "needs onnxruntime's CUDAExecutionProvider" in record["reason"]
    assert record["device"]["cuda_visible_devices"] == "MIG-0b9e4a5c-1111-2222-3333-444455556666"
    assert record["device"]["onnxruntime_imported_before_binding"] is False
    assert record["telemetry"] is None and record["scenario"] is None


def test_sync_stdin_starts_at_the_go_time(write_spec: Callable[..., Path],
                                          tmp_path: Path) -> None:
    spec = write_spec()
    process = subprocess.Popen(
        [sys.executable, "-m", "loadgen", "run", str(spec), "--out", str(tmp_path / "out"),
         "--sync", "stdin"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert process.stdout is not None and process.stdin is not None
        assert process.stdout.readline() == READY_LINE + "\n"
        # Nothing starts before GO: LoadGen has not written its logs yet.
        time.sleep(0.3)
        assert not (tmp_path / "out" / "mlperf_log_detail.txt").exists()
        go = time.time() + 0.7
        process.stdin.write(f"GO {go:.6f}\n")
        process.stdin.flush()
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""
    record = json.loads((tmp_path / "out" / "result.json").read_text())
    assert record["sync"]["mode"] == "stdin"
    sync = record["sync"]
    assert sync["go_unix"] == pytest.approx(go, abs=1e-5)
    # In order: the GO line arrived, the test started at the GO time or after it (late_s
    # after), then the timed part began. How late, and how close two instances start, are
    # timing claims: benchmarks/bench_sync_start.py measures them.
    assert sync["late_s"] >= 0.0 and sync["go_received_unix"] <= record["timed_start_unix"]
    assert go <= sync["go_unix"] + sync["late_s"] <= record["timed_start_unix"] + 1e-6
    assert record["timed_start_unix"] < record["timed_end_unix"]


@pytest.mark.slow
def test_sync_holds_two_instances_until_one_go(model_cache: Path, tmp_path: Path) -> None:
    processes = []
    try:
        for name in ("a", "b"):
            spec = tmp_path / f"{name}.json"
            spec.write_text(json.dumps(base_spec(model_cache, instance_name=name)))
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "loadgen", "run", str(spec), "--out",
                 str(tmp_path / name), "--sync", "stdin"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT))
        for process in processes:  # both loaded and warmed up before anyone starts
            assert process.stdout is not None
            assert process.stdout.readline() == READY_LINE + "\n"
        go = time.time() + 0.5
        for process in processes:
            assert process.stdin is not None
            process.stdin.write(f"GO {go:.6f}\n")
            process.stdin.flush()
        assert [p.wait(timeout=60) for p in processes] == [0, 0]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    records = [json.loads((tmp_path / n / "result.json").read_text()) for n in ("a", "b")]
    # both held until the one GO time, neither started before it (the start skew is a
    # timing claim: benchmarks/bench_sync_start.py measures it)
    assert [r["sync"]["go_unix"] for r in records] == [pytest.approx(go, abs=1e-5)] * 2
    assert all(go <= r["timed_start_unix"] < r["timed_end_unix"] for r in records)


def test_sync_rejects_a_malformed_go_line(write_spec: Callable[..., Path],
                                          tmp_path: Path) -> None:
    result = run_cli("run", str(write_spec()), "--out", str(tmp_path / "out"), "--sync",
                     "stdin", stdin="START now\n")
    assert result.returncode == 1
    assert result.stdout == READY_LINE + "\n"
    record = json.loads((tmp_path / "out" / "result.json").read_text())
    assert record["status"] == "failed"
    assert "expected 'GO <unix_epoch_float>' on stdin, got 'START now'" in record["reason"]


def test_read_model_io_of_bert_matches_spec_defaults(model_cache: Path) -> None:
    io = read_model_io(build_model("bert", "tiny", "fp32", model_cache))
    assert io.metadata["vgpu.vocab_size"] == "1024"
