"""Model llm: the seeded tiny decoder, its exact-agreement gate and real LoadGen runs that
report token latencies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import numpy_helper

from loadgen.contract import AccuracySpec, LlmSpec
from loadgen.errors import SpecError
from loadgen.llm.engines import OrtGenerator
from loadgen.llm.gate import run_token_gate
from loadgen.llm.prompts import make_prompts
from loadgen.llm_sizes import VARIANTS
from loadgen.models import build_model
from loadgen.models.catalog import WEIGHT_SEED
from loadgen.models.decoder import decoder_weights, reference_generate
from loadgen.runner import run
from loadgen.spec import parse_spec

LLM = LlmSpec(max_output_tokens=12, input_tokens_min=8, input_tokens_max=24)
TINY = VARIANTS["tiny"]


def llm_doc(cache: Path, scenario: str = "Offline", **overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": 1, "model": {"name": "llm", "variant": "tiny"},
        "backend": {"name": "onnxruntime", "threads": 1},
        "loadgen": {"scenario": scenario, "min_duration_ms": 600,
                    "performance_sample_count": 32},
        "seed": 3, "warmup_queries": 1, "cache_dir": str(cache),
        "llm": LLM.to_json(),
    }
    if scenario != "Offline":
        doc["loadgen"]["target_qps"] = 40
    return doc | overrides


@pytest.fixture(scope="module")
def tiny_model(model_cache: Path) -> Path:
    return build_model("llm", "tiny", "fp32", model_cache)


def test_generated_tokens_are_reproducible_from_the_seed(tiny_model: Path) -> None:
    prompt = make_prompts(3, 1, LLM, TINY.vocab_size)[0]
    generator = OrtGenerator(str(tiny_model), "tiny", 1)
    firsts: list[int] = []
    tokens = generator.generate(prompt, 12, firsts.append)
    assert tokens == generator.generate(prompt, 12)
    assert firsts == tokens[:1]
    assert tokens == reference_generate(prompt, 12, decoder_weights(TINY, WEIGHT_SEED), TINY)
    other = reference_generate(prompt, 12, decoder_weights(TINY, WEIGHT_SEED + 1), TINY)
    assert other != tokens
    assert len(set(tokens)) > 3  # not stuck on one token
    assert (prompt == make_prompts(3, 1, LLM, TINY.vocab_size)[0]).all()
    assert 8 <= len(prompt) <= 24


def test_the_gate_passes_the_built_model_and_catches_a_changed_weight(
        tiny_model: Path, tmp_path: Path) -> None:
    prompts = make_prompts(3, 4, LLM, TINY.vocab_size)
    accuracy = AccuracySpec(target=1.0, samples=4)
    good = run_token_gate(OrtGenerator(str(tiny_model), "tiny", 1), prompts, LLM, accuracy,
                          "tiny", WEIGHT_SEED)
    assert (good["value"], good["passed"], good["samples"]) == (1.0, True, 4)
    model = onnx.load(str(tiny_model))
    head = next(t for t in model.graph.initializer if t.name.startswith("lm_head"))
    weights = numpy_helper.to_array(head).copy()
    weights[:, 0] += 3.0  # one vocabulary entry's column of the output head
    head.CopyFrom(numpy_helper.from_array(weights, head.name))
    changed = tmp_path / "changed.onnx"
    onnx.save_model(model, str(changed))
    bad = run_token_gate(OrtGenerator(str(changed), "tiny", 1), prompts, LLM, accuracy,
                         "tiny", WEIGHT_SEED)
    assert bad["passed"] is False
    assert bad["value"] < 1.0
    assert bad["first_mismatch_sample"] is not None


def test_interactive_run_reports_loadgen_first_token_latencies(
        model_cache: Path, tmp_path: Path) -> None:
    doc = llm_doc(model_cache, "Interactive", accuracy={"target": 1.0, "samples": 2})
    record = run(parse_spec(doc), tmp_path)
    assert record["status"] == "ok", record["reason"]
    tokens = record["tokens"]
    assert tokens["source"] == "loadgen"
    assert 0 < tokens["time_to_first_token_ms"]["p50"] <= tokens["time_to_first_token_ms"]["p99"]
    assert tokens["inter_token_latency_ms"]["p50"] > 0
    assert tokens["output_token_throughput"] > 0
    assert tokens["output_tokens"] == 12 * tokens["sequences"] > 0
    assert tokens["targets_ms"] == {"ttft_p99": 50.0, "tpot_p99": 3.0}
    assert record["scenario"] == "Interactive"
    assert record["accuracy"]["passed"] is True
    logged = json.loads((tmp_path / "mlperf_log_accuracy.json").read_text())
    assert [entry["qsl_idx"] for entry in logged] == [0, 1]
    assert len(bytes.fromhex(logged[0]["data"])) == 4 * 12  # 12 int32 token ids
    assert record["logs"]["mlperf_log_accuracy.json"] == "mlperf_log_accuracy.json"
    summary = (tmp_path / "mlperf_log_summary.txt").read_text()
    mean_line = next(line for line in summary.splitlines()
                     if line.startswith("Mean First Token latency"))
    assert int(mean_line.split(":")[1]) > 0
    detail = (tmp_path / "mlperf_log_detail.txt").read_text()
    assert '"requested_server_ttft_latency", "value": 50000000' in detail
    assert json.loads((tmp_path / "result.json").read_text())["tokens"]["sequences"] > 0


def test_offline_run_counts_tokens_per_second(model_cache: Path, tmp_path: Path) -> None:
    record = run(parse_spec(llm_doc(model_cache)), tmp_path)
    assert record["status"] == "ok", record["reason"]
    tokens = record["tokens"]
    assert tokens["output_token_throughput_source"] == "result_tokens_per_second"
    assert tokens["output_token_throughput"] > 0
    assert tokens["source"] == "sut"
    assert tokens["time_to_first_token_ms"]["p50"] > 0
    assert record["sut"]["output_tokens"] == 12 * record["sut"]["completed_samples"]


@pytest.mark.parametrize(("change", "field"), [
    ({"model": {"name": "llm", "variant": "8b"}}, "model.variant"),
    ({"backend": {"name": "triton"}}, "backend.name"),
    ({"llm": {"input_tokens": {"min": 30, "max": 10}}}, "llm.input_tokens.max"),
    ({"loadgen": {"scenario": "SingleStream"}}, "loadgen.scenario"),
    ({"loadgen": {"scenario": "Server"}}, "loadgen.target_qps"),
    ({"loadgen": {"mlperf_rules": True}}, "loadgen.mlperf_rules"),
    ({"model": {"name": "llm", "variant": "8b"}, "backend": {"name": "openai",
      "url": "http://vllm:8000"}, "accuracy": {"target": 1.0}}, "accuracy"),
])
def test_bad_llm_specs_name_the_field(model_cache: Path, change: dict[str, Any],
                                      field: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(llm_doc(model_cache) | change)
    assert f"{field}:" in str(caught.value)


def test_interactive_and_the_llm_section_belong_to_model_llm(model_cache: Path) -> None:
    doc = llm_doc(model_cache, "Interactive", model={"name": "bert", "variant": "tiny"})
    with pytest.raises(SpecError) as caught:
        parse_spec(doc)
    assert "loadgen.scenario:" in str(caught.value) and "llm:" in str(caught.value)


def test_the_torch_engine_generates_the_onnx_models_tokens(tiny_model: Path) -> None:
    pytest.importorskip("torch", reason="the train extra (torch) is not installed")
    from loadgen.llm.torch_engine import TorchGenerator

    prompts = make_prompts(5, 3, LLM, TINY.vocab_size)
    onnx_engine = OrtGenerator(str(tiny_model), "tiny", 1)
    torch_engine = TorchGenerator("tiny", WEIGHT_SEED, 1, "cpu")
    assert torch_engine.describe()["execution_provider"] == "torch-cpu"
    for prompt in prompts:
        assert torch_engine.generate(prompt, 12) == onnx_engine.generate(prompt, 12)


def test_the_http_streaming_sut_against_the_loopback_server(model_cache: Path,
                                                            tiny_model: Path,
                                                            tmp_path: Path) -> None:
    from loadgen.llm.openai_client import OpenAIGenerator
    from loadgen.llm.stream import chunk_tokens

    generator = OpenAIGenerator.connect(None, None, 1, "tiny", str(model_cache))
    try:
        prompt = make_prompts(3, 1, LLM, TINY.vocab_size)[0]
        firsts: list[int] = []
        expected = OrtGenerator(str(tiny_model), "tiny", 1).generate(prompt, 12)
        assert generator.generate(prompt, 12, firsts.append) == expected
        assert firsts == expected[:1]
        assert generator.describe()["loopback_server"] is True
    finally:
        generator.close()
    assert generator.server is not None and generator.server.process.poll() is not None
    assert chunk_tokens({"choices": [{"text": " hi"}]}) == ([-1], False)  # no ids sent
    doc = llm_doc(model_cache, "Server", backend={"name": "openai"},
                  accuracy={"target": 1.0, "samples": 2})
    record = run(parse_spec(doc), tmp_path)
    assert record["status"] == "ok", record["reason"]
    assert record["backend"]["execution_provider"] == "http-sse"
    assert record["tokens"]["source"] == "loadgen"
    assert record["tokens"]["time_to_first_token_ms"]["p50"] > 0
    gaps = record["tokens"]["inter_token_gap_ms"]  # every token timed, usage checked
    assert gaps["samples"] == record["tokens"]["sequences"] * (LLM.max_output_tokens - 1)
    assert gaps["longest"] >= gaps["p99.9"] >= gaps["p99"] > 0
    assert record["accuracy"]["passed"] is True


def test_backend_openai_urls_are_checked(model_cache: Path) -> None:
    doc = llm_doc(model_cache, backend={"name": "openai", "url": "localhost:8000"})
    with pytest.raises(SpecError, match=r"backend.url: 'localhost:8000' is not an http"):
        parse_spec(doc)
    spec = parse_spec(llm_doc(model_cache, backend={"name": "openai",
                                                    "url": "http://vllm:8000"}))
    assert spec.backend.to_json() == {"name": "openai", "url": "http://vllm:8000",
                                      "in_flight": 1}


def test_over_http_every_query_gets_a_prompt_of_its_own(tiny_model: Path) -> None:
    """A serving engine's prefix cache must not answer a repeated sample: each query's
    prompt starts with its own number; in-process the samples stay as they are."""
    from loadgen.llm.sut import TokenSut

    generator = OrtGenerator(str(tiny_model), "tiny", 1)
    prompts = make_prompts(3, 2, LLM, TINY.vocab_size)
    unique = TokenSut(generator, prompts, 4, TINY.vocab_size)
    plain = TokenSut(generator, prompts, 4)
    try:
        heads = {tuple(unique.prompt(i % 2)[:3]) for i in range(600)}
        assert len(heads) == 600
        assert (unique.prompt(0)[3:] == prompts[0][3:]).all()
        assert plain.prompt(1) is prompts[1]
    finally:
        unique.stop()
        plain.stop()


def test_a_capacity_spec_searches_the_loopback_server_and_records_its_caches(
        model_cache: Path, tmp_path: Path) -> None:
    # onnxruntime: the harness serves the tiny model on a loopback port for the search
    doc = llm_doc(model_cache, "Server", accuracy={"target": 1.0, "samples": 2})
    del doc["loadgen"]["target_qps"]
    # a TTFT target a tenth of the 0.5 s runs: the runs are not lengthened
    doc["llm"] = {**LLM.to_json(), "ttft_ms": 50, "tpot_ms": 100, "capacity": {
        "start_qps": 20, "runs": 3, "duration_s": 0.5, "min_queries": 20, "repeat": 1,
        "concurrency": 4}}
    record = run(parse_spec(doc), tmp_path)
    assert record["status"] == "ok", record["reason"]
    search = record["capacity"]
    assert len(search["runs"]) == 3 and search["repeat"] == 1
    assert search["runs"][0]["rate"] == 20 and search["runs"][0]["queries"] == 20
    client = search["runs"][0]["client"]
    assert search["concurrency"] == 4 and client["concurrency"] == 4
    assert 1 <= client["connections"] <= 4 and client["cpu_s"] > 0
    assert record["validity"]["result"] == ("VALID" if search["capacity_qps"] else "INVALID")
    assert search["slo_ms"] == {"ttft_ms": 50, "tpot_ms": 100}
    assert search["budget"]["duration_s"] == 0.5
    assert search["engine"]["version"]["version"].startswith("vgpu-loopback")
    cache = search["engine"]["cache"]
    assert cache["metrics_exposed"] is True
    assert cache["kv_blocks_used"] == 0  # every answer ended, its cache released
    assert cache["kv_blocks_peak"] >= 2  # a prompt of 8+ tokens and 12 answered
    assert cache["prefix_cache_hit_rate"] == 0.0
    assert record["accuracy"]["passed"] is True
    assert "tokens" not in record  # no LoadGen run at a fixed rate


def test_a_capacity_budget_under_three_runs_names_its_field(model_cache: Path) -> None:
    doc = llm_doc(model_cache, "Server")
    doc["llm"] = {**LLM.to_json(), "capacity": {"runs": 2, "resolution": 1.5,
                                                 "concurrency": 0}}
    with pytest.raises(SpecError) as err:
        parse_spec(doc)
    assert "llm.capacity.runs" in str(err.value)
    assert "llm.capacity.resolution" in str(err.value)
    assert "llm.capacity.concurrency" in str(err.value)
