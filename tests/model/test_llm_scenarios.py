"""LLM workloads in scenarios: the memory arithmetic, the refusal at load when a slice
cannot hold the model, `vgpu plan`'s estimate line, and the catalogue's LLM workloads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from loadgen.contract import estimate
from tests.cli.invoke import run_cli
from vgpu import catalog
from vgpu.bench.workload import BenchOverrides, effective_workload, harness_spec
from vgpu.errors import InputError
from vgpu.model.load import load_scenario
from vgpu.model.scenario import InferenceWorkload

LLAMA_8B = {"name": "llama8b", "model": "llm", "variant": "8b", "backend": "openai",
            "url": "http://localhost:8000", "precision": "fp16", "scenario": "Server",
            "target_qps": 2, "batch": 8, "max_output_tokens": 1024,
            "input_tokens": {"min": 128, "max": 1024}}


def write_scenario(tmp_path: Path, slices: list[str], workload: dict[str, Any]) -> Path:
    doc = {"id": "llmt", "name": "llm test", "platform": "bare-metal", "gpu": "A100-80GB",
           "vms": [{"name": f"i{n}", "vgpus": [s]} for n, s in enumerate(slices)],
           "guest": {"driver": "datacenter", "licensing": False},
           "workloads": [workload]}
    path = tmp_path / "llm.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_arithmetic_of_llama_8b() -> None:
    est = estimate("8b", "fp16", 8, 2048)
    # llama3.1-8b's 8.03 B parameters, plus 8192 learned positions x 4096 (no RoPE here)
    assert est.weights_bytes == 2 * 8_063_815_680
    assert est.kv_cache_bytes == 8 * 2048 * 2 * 32 * 8 * 128 * 2  # 2 GiB
    assert not est.fits(10) and est.fits(20) and est.fits(40)
    assert estimate("tiny", "fp32", 1, 80).total_bytes < 1024**2


def test_a_model_a_slice_cannot_hold_is_refused_with_the_arithmetic(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, ["1g.10gb", "3g.40gb"], LLAMA_8B)
    code, _, err = run_cli(["plan", str(path)])
    assert code == 2
    assert str(path) in err and "workloads[0].variant" in err
    assert "VM 'i0' gets 1g.10gb" in err and "i1" not in err
    assert "15.02 GiB + KV cache 8 seq x 2048 tokens x 128.00 KiB = 2.00 GiB" in err
    assert "fix: give the VM a larger slice, or lower batch" in err
    with pytest.raises(InputError):
        load_scenario(path)


def test_plan_prints_the_memory_estimate(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, ["2g.20gb", "3g.40gb"], {**LLAMA_8B, "batch": 4})
    code, out, _ = run_cli(["plan", str(path)])
    assert code == 0
    flat = " ".join(out.split())
    assert "memory estimate llama8b: weights 8.06 B params x 2 B = 15.02 GiB" in flat
    assert "total 16.02 GiB; 2g.20gb fits (20 GB), 3g.40gb fits (40 GB)" in flat


@pytest.mark.parametrize("ref", ["6", "bm6"])
def test_scenario_6_runs_the_llm_server_workload(ref: str) -> None:
    scenario = catalog.load(ref)
    llm = [w for w in scenario.workloads
           if isinstance(w, InferenceWorkload) and w.model == "llm"]
    assert [(w.label, w.scenario) for w in llm] == [("llm-server", "Server")]


def test_a_cpu_run_gets_mlperf_token_targets_and_says_so() -> None:
    workload = InferenceWorkload(model="llm", scenario="Interactive", target_qps=50,
                                 max_output_tokens=8)
    effective = effective_workload(workload, True, BenchOverrides())
    assert effective.llm is not None
    assert (effective.llm.ttft_ms, effective.llm.tpot_ms) == (500.0, 30.0)
    assert any("TTFT p99 500 ms" in note for note in effective.notes)
    on_gpu = effective_workload(workload, False, BenchOverrides())
    assert on_gpu.llm is not None and on_gpu.llm.ttft_ms is None
    spec = harness_spec(effective, instance="i0", device={"kind": "cpu"}, threads=1)
    assert spec.to_json()["llm"] == {"max_output_tokens": 8,
                                     "input_tokens": {"min": 16, "max": 64},
                                     "ttft_ms": 500.0, "tpot_ms": 30.0}


@pytest.mark.parametrize(("fields", "message"), [
    ({"model": "bert", "max_output_tokens": 8}, "apply only to model llm"),
    ({"model": "resnet50", "scenario": "Interactive", "target_qps": 5}, "Interactive is"),
    ({"model": "llm", "scenario": "Interactive"}, "needs target_qps"),
    ({"model": "llm", "backend": "triton"}, "runs on onnxruntime, torch or openai"),
    ({"model": "llm", "url": "http://x:8000"}, "url applies only to backend openai"),
    ({"model": "llm", "variant": "8b", "backend": "openai", "accuracy_target": 0.99},
     "accuracy_target needs the seeded tiny model"),
])
def test_llm_fields_are_checked(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        InferenceWorkload(**fields)


@pytest.mark.parametrize("field", [{"runs": 2}, {"concurrency": 0}])
def test_a_capacity_budget_out_of_range_names_its_field(tmp_path: Path,
                                                        field: dict[str, int]) -> None:
    path = write_scenario(tmp_path, ["7g.80gb"], {
        "model": "llm", "scenario": "Server", "capacity": {"start_qps": 10, **field}})
    code, _, err = run_cli(["plan", str(path)])
    assert code == 2
    text = " ".join(err.split())
    assert str(path) in text and f"workloads[0].capacity.{next(iter(field))}" in text


def test_a_capacity_budget_too_small_for_its_resolution_names_the_runs_it_needs(
        tmp_path: Path) -> None:
    path = write_scenario(tmp_path, ["7g.80gb"], {
        "model": "llm", "scenario": "Server",
        "capacity": {"start_qps": 50, "runs": 5, "resolution": 0.1}})
    code, _, err = run_cli(["plan", str(path)])
    assert code == 2
    text = " ".join(err.split())
    assert str(path) in text and "workloads[0].capacity" in text
    assert "runs 5 cannot bisect a doubling bracket to resolution 0.1" in text
    assert "set runs to 6 or more" in text


def test_a_capacity_workload_ships_its_search_with_the_repeat_as_arrival_pattern() -> None:
    workload = InferenceWorkload(model="llm", scenario="Server",
                                 capacity={"start_qps": 20, "runs": 8})
    assert workload.capacity is not None and workload.capacity.concurrency == 256
    effective = effective_workload(workload, True, BenchOverrides())
    spec = harness_spec(effective, instance="i0", device={"kind": "cpu"}, threads=1,
                        repeat=3).to_json()
    assert spec["llm"]["capacity"] == {"start_qps": 20.0, "runs": 8, "resolution": 0.025,
                                       "duration_s": 2.0, "min_queries": 100,
                                       "concurrency": 256, "repeat": 3}
    assert "target_qps" not in spec["loadgen"]


def test_mlperf_rules_leave_the_llm_workload_on_its_token_targets() -> None:
    workload = InferenceWorkload(model="llm", scenario="Server", target_qps=50)
    effective = effective_workload(workload, True, BenchOverrides(mlperf_rules=True))
    assert any("not applied to model llm" in note for note in effective.notes)
    spec = harness_spec(effective, instance="i0", device={"kind": "cpu"}, threads=1)
    assert "mlperf_rules" not in spec.to_json()["loadgen"]


@pytest.mark.parametrize(("workload", "message", "fix"), [
    ({"model": "llm", "variant": "8b", "scenario": "Offline", "backend": "onnxruntime"},
     "llm 8b is declared for the memory arithmetic and a serving endpoint",
     "use variant tiny, or backend openai with url"),
    ({"model": "bert", "scenario": "Offline", "backend": "openai"},
     "backend openai serves only model llm", "set model to llm or choose another backend"),
    ({"model": "llm", "scenario": "Offline", "capacity": {"start_qps": 10}},
     "a capacity search is a Server or Interactive measurement, not Offline's",
     "remove capacity, or set scenario to Server"),
])
def test_a_scenario_breaking_an_llm_rule_names_file_field_and_fix(
        tmp_path: Path, workload: dict[str, Any], message: str, fix: str) -> None:
    # the rules of loadgen.llm.rules, which the harness checks its run specs against too
    path = write_scenario(tmp_path, ["7g.80gb"], workload)
    code, _, err = run_cli(["plan", str(path)])
    assert code == 2
    text = " ".join(err.split())
    assert str(path) in text and "workloads[0]" in text
    assert message in text and f"fix: {fix}" in text


@pytest.mark.parametrize(("variant", "server", "interactive"), [
    ("70b", (2000.0, 200.0), (450.0, 40.0)),  # MLPerf llama2-70b's own
    ("8b", (2000.0, 100.0), (500.0, 30.0)),  # llama3.1-8b's
])
def test_a_served_llama_gets_its_own_mlperf_token_targets(
        variant: str, server: tuple[float, float], interactive: tuple[float, float]) -> None:
    for scenario, targets in (("Server", server), ("Interactive", interactive)):
        workload = InferenceWorkload(model="llm", variant=variant, backend="openai",
                                     url="http://vllm:8000", scenario=scenario,
                                     target_qps=5)
        llm = effective_workload(workload, True, BenchOverrides()).llm
        assert llm is not None and (llm.ttft_ms, llm.tpot_ms) == targets


def test_a_cpu_capacity_search_gets_a_ttft_target_a_tenth_of_its_runs() -> None:
    """With MLPerf's 2 s TTFT, a 2 s run's queue may grow all run long and stay VALID:
    the search would report up to twice the rate the server sustains."""
    workload = InferenceWorkload(model="llm", scenario="Server",
                                 capacity={"start_qps": 50, "duration_s": 2})
    effective = effective_workload(workload, True, BenchOverrides())
    assert effective.llm is not None and effective.llm.capacity is not None
    assert (effective.llm.ttft_ms, effective.llm.tpot_ms) == (200.0, 100.0)
    assert effective.llm.capacity.duration_s == 2.0
    flat = " ".join(effective.notes)
    assert "TTFT p99 200 ms, TPOT p99 100 ms" in flat
    assert "TTFT at most a 10th of a capacity run's 2 s" in flat
    # at LoadGen's fixed rate there is no search: MLPerf's targets as before
    fixed = effective_workload(InferenceWorkload(model="llm", scenario="Server",
                                                 target_qps=50), True, BenchOverrides())
    assert fixed.llm is not None and fixed.llm.ttft_ms == 2000.0


@pytest.mark.parametrize(("fields", "seconds"), [
    ({"variant": "8b", "backend": "openai", "url": "http://vllm:8000"}, 20.0),  # 2000 ms
    ({"ttft_ms": 500.0, "tpot_ms": 50.0}, 5.0),
    ({"ttft_ms": 100.0, "tpot_ms": 50.0}, 2.0),  # already ten targets long
])
def test_capacity_runs_last_at_least_ten_ttft_targets(fields: dict[str, Any],
                                                      seconds: float) -> None:
    workload = InferenceWorkload(model="llm", scenario="Server",
                                 capacity={"start_qps": 5, "duration_s": 2}, **fields)
    effective = effective_workload(workload, False, BenchOverrides())
    assert effective.llm is not None and effective.llm.capacity is not None
    assert effective.llm.capacity.duration_s == seconds
    lengthened = [n for n in effective.notes if n.startswith("capacity runs of")]
    assert len(lengthened) == (seconds > 2.0)
    spec = harness_spec(effective, instance="i0", device={"kind": "cuda"}, threads=1)
    assert spec.to_json()["llm"]["capacity"]["duration_s"] == seconds
