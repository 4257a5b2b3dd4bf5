"""--inject-slowdown on the LLM workload: the ONNX Runtime engine spins after every step
for the share it was given (its answers unchanged), a capacity search's loopback server is
started slowed and says so, and an engine that cannot be slowed refuses the run."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from loadgen.contract import LlmSpec
from loadgen.errors import RunFailed
from loadgen.llm import engines
from loadgen.llm.engines import OrtGenerator
from loadgen.llm.openai_client import LoopbackServer, OpenAIGenerator
from loadgen.llm.prompts import make_prompts
from loadgen.llm.run import open_generator
from loadgen.llm.server import MODEL_ID
from loadgen.llm_sizes import VARIANTS
from loadgen.models import build_model
from loadgen.spec import parse_spec

LLM = LlmSpec(max_output_tokens=12, input_tokens_min=8, input_tokens_max=24)
PROMPT = make_prompts(3, 1, LLM, VARIANTS["tiny"].vocab_size)[0]


@pytest.fixture(scope="module")
def tiny_model(model_cache: Path) -> Path:
    return build_model("llm", "tiny", "fp32", model_cache)


def test_every_step_spins_its_share_and_the_answer_is_unchanged(
        tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spun: list[float] = []
    monkeypatch.setattr(engines, "spin_without_gil", spun.append)
    plain = OrtGenerator(str(tiny_model), "tiny", 1)
    expected = plain.generate(PROMPT, 12)
    assert spun == [] and "injected_slowdown" not in plain.describe()
    slowed = OrtGenerator(str(tiny_model), "tiny", 1, slowdown=0.2)
    ticks = itertools.count()  # each step takes one second on this clock
    monkeypatch.setattr(engines.time, "perf_counter", lambda: float(next(ticks)))
    assert slowed.generate(PROMPT, 12) == expected
    # a 20% slower device: 0.25 s more for every second of work, after each of 12 steps
    assert spun == [pytest.approx(0.25)] * 12
    assert slowed.describe()["injected_slowdown"] == 0.2
    with pytest.raises(ValueError, match="slowdown share"):
        OrtGenerator(str(tiny_model), "tiny", 1, slowdown=0.95)


def test_the_loopback_server_of_a_capacity_search_runs_slowed(
        model_cache: Path, tiny_model: Path) -> None:
    expected = OrtGenerator(str(tiny_model), "tiny", 1).generate(PROMPT, 12)
    server = LoopbackServer("tiny", str(model_cache), 1, 0.2)
    generator = OpenAIGenerator(server.url, MODEL_ID, 1, server)
    try:
        assert generator.generate(PROMPT, 12) == expected
        assert generator.describe()["injected_slowdown"] == 0.2
    finally:
        generator.close()


@pytest.mark.parametrize("backend", [{"name": "openai", "url": "http://vllm:8000"},
                                     {"name": "torch"}])
def test_an_engine_that_cannot_be_slowed_refuses_the_run(model_cache: Path,
                                                         backend: dict[str, str]) -> None:
    spec = parse_spec({
        "schema_version": 1, "model": {"name": "llm", "variant": "tiny"}, "backend": backend,
        "loadgen": {"scenario": "Server", "target_qps": 10, "performance_sample_count": 8},
        "cache_dir": str(model_cache), "llm": LLM.to_json(), "slowdown": 0.1})
    with pytest.raises(RunFailed, match="injected slowdown slows the onnxruntime engine"):
        open_generator(spec)

