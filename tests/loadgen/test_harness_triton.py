"""The Triton SUT against a real Triton server (python backend running onnxruntime), over
gRPC and HTTP, with the server's own statistics; and a server killed mid-run."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loadgen.models import build_model
from loadgen.runner import run
from loadgen.spec import parse_spec
from loadgen.sync import READY_LINE
from loadgen.triton_repo import model_config, write_repository
from tests.labs.triton import TritonServer, triton_unavailable
from tests.loadgen.harness_helpers import ROOT, base_spec, run_cli

pytestmark = pytest.mark.triton
needs_triton = pytest.mark.skipif(triton_unavailable() is not None,
                                  reason=triton_unavailable() or "")


def test_python_repository_layout_and_config(model_cache: Path, tmp_path: Path) -> None:
    result = run_cli("triton-repo", "--model", "resnet50", "--variant", "tiny", "--out",
                     str(tmp_path / "repo"), "--kind", "python", "--threads", "1",
                     "--cache-dir", str(model_cache))
    assert result.returncode == 0, result.stderr
    model_dir = tmp_path / "repo" / "resnet50"
    assert result.stdout.strip() == str(model_dir)
    assert sorted(p.relative_to(model_dir).as_posix() for p in model_dir.rglob("*")) == [
        "1", "1/model.onnx", "1/model.py", "config.pbtxt"]
    config = (model_dir / "config.pbtxt").read_text()
    assert 'backend: "python"' in config and "kind: KIND_CPU" in config
    assert "dynamic_batching { }" in config and "max_batch_size: 64" in config
    assert 'name: "input"\n    data_type: TYPE_FP32\n    dims: [ 3, 32, 32 ]' in config
    assert 'key: "intra_op_threads"\n  value: { string_value: "1" }' in config


def test_onnxruntime_repository_config_for_gpu_labs(model_cache: Path) -> None:
    config = model_config(build_model("bert", "tiny", "fp16", model_cache), "bert",
                          "onnxruntime", max_batch_size=16, instances=2)
    assert 'platform: "onnxruntime_onnx"' in config and "backend:" not in config
    assert "kind: KIND_GPU\n    count: 2" in config
    assert "max_batch_size: 16" in config and "max_queue_delay_microseconds" in config
    assert config.count("data_type: TYPE_INT64") == 3
    assert config.count("data_type: TYPE_FP16") == 2


def test_triton_repo_rejects_an_unknown_model(tmp_path: Path) -> None:
    result = run_cli("triton-repo", "--model", "vit", "--out", str(tmp_path / "repo"))
    assert result.returncode == 2
    assert "neither resnet50, bert nor an existing .onnx file" in result.stderr


@pytest.fixture(scope="module")
def triton_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("triton-models")
    repo = tmp_path_factory.mktemp("triton") / "repo"
    write_repository(repo, build_model("resnet50", "tiny", "fp32", cache), "resnet50",
                     kind="python", max_batch_size=32, intra_op_threads=1)
    return repo


@pytest.fixture(scope="module")
def triton_server(triton_repo: Path) -> Iterator[TritonServer]:
    with TritonServer(triton_repo) as server:
        yield server


def triton_spec(cache: Path, url: str, protocol: str, **loadgen: Any) -> dict[str, Any]:
    doc = base_spec(cache, backend={"name": "triton", "url": url, "protocol": protocol,
                                    "model_name": "resnet50", "in_flight": 3})
    doc["loadgen"].update(loadgen)
    return doc


@needs_triton
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_triton_sut_runs_and_reads_server_statistics(
        triton_server: TritonServer, model_cache: Path, tmp_path: Path, protocol: str) -> None:
    url = triton_server.grpc_url if protocol == "grpc" else triton_server.http_url
    doc = triton_spec(model_cache, url, protocol, target_qps=1500)
    record = run(parse_spec(doc, "spec.json", tmp_path), tmp_path / "out")
    assert record["status"] == "ok", record["reason"]
    assert record["throughput"]["samples_per_second"] > 0
    assert record["backend"]["protocol"] == protocol
    assert record["backend"]["in_flight"] == 3
    stats = record["backend"]["server_statistics"]["timed_run"]
    # Warm-up is left out: the server saw exactly the samples LoadGen issued.
    assert stats["inference_count"] == record["sample_count"] == record["sut"]["completed_samples"]
    assert stats["success"]["count"] == record["sut"]["batches"]
    assert stats["fail"]["count"] == 0
    # Dynamic batching may merge requests: executions never exceed requests.
    assert 0 < stats["execution_count"] <= stats["success"]["count"]
    for kind in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert stats[kind]["count"] == stats["success"]["count"]
        assert stats[kind]["ns"] > 0 and stats[kind]["mean_us"] > 0
    cumulative = record["backend"]["server_statistics"]["cumulative"]
    assert cumulative["inference_count"] >= stats["inference_count"] + 2 * 4  # + warm-up


@needs_triton
def test_triton_server_scenario_over_grpc(triton_server: TritonServer, model_cache: Path,
                                          tmp_path: Path) -> None:
    doc = triton_spec(model_cache, triton_server.grpc_url, "grpc", scenario="Server",
                      target_qps=200, target_latency_ms=100, min_query_count=16)
    record = run(parse_spec(doc, "spec.json", tmp_path), tmp_path / "out")
    assert record["status"] == "ok", record["reason"]
    assert record["query_count"] >= 16
    assert record["latency_ns"]["p50"] < 100_000_000


@needs_triton
def test_wrong_triton_model_name_fails_the_run(triton_server: TritonServer, model_cache: Path,
                                               tmp_path: Path) -> None:
    doc = triton_spec(model_cache, triton_server.grpc_url, "grpc")
    doc["backend"]["model_name"] = "bert"
    record = run(parse_spec(doc, "spec.json", tmp_path), tmp_path / "out")
    assert record["status"] == "failed"
    assert "has no ready model 'bert'" in record["reason"]


@needs_triton
@pytest.mark.slow
def test_server_killed_mid_run_gives_a_failed_result(triton_repo: Path, model_cache: Path,
                                                     tmp_path: Path) -> None:
    server = TritonServer(triton_repo).start()
    try:
        spec = tmp_path / "spec.json"
        # Offline with a large query: about 3 s of work, the server dies after 1 s.
        doc = triton_spec(model_cache, server.grpc_url, "grpc", target_qps=20000,
                          min_duration_ms=1000)
        spec.write_text(json.dumps(doc))
        process = subprocess.Popen(
            [sys.executable, "-m", "loadgen", "run", str(spec), "--out", str(tmp_path / "out"),
             "--sync", "stdin"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=ROOT)
        assert process.stdout is not None and process.stdin is not None
        assert process.stdout.readline() == READY_LINE + "\n"
        process.stdin.write(f"GO {time.time():.6f}\n")
        process.stdin.flush()
        time.sleep(1.0)
        server.kill()
        returncode = process.wait(timeout=120)
    finally:
        server.stop()
        if process.poll() is None:
            process.kill()
            process.wait()
    assert returncode == 1
    record = json.loads((tmp_path / "out" / "result.json").read_text())
    assert record["status"] == "failed"
    assert record["reason"].startswith("triton inference failed:")
    assert record["sut"]["failed_samples"] > 0
    assert record["sut"]["completed_samples"] > 0
    assert record["sut"]["failed_samples"] + record["sut"]["completed_samples"] == \
        record["sample_count"]
    assert "error" in record["backend"]["server_statistics"]
    assert record["validity"]["result"] == "INVALID"
    assert record["validity"]["reasons"][-1] == (
        f"harness: {record['sut']['failed_samples']} samples failed in the backend and were "
        f"completed without inference")
    # LoadGen still finished and its logs are kept next to the failed record.
    assert (tmp_path / "out" / "mlperf_log_detail.txt").stat().st_size > 0
    assert (tmp_path / "out" / "mlperf_log_summary.txt").exists()
