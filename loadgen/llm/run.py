"""One harness run of the token workload (model llm): open the engine, warm up, wait for
the synchronised start, run LoadGen with token latencies, then the exact-agreement gate;
result.json has the usual fields plus ``tokens``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg

from loadgen.contract import (
    LLM_MODEL,
    TOKEN_SCENARIOS,
    LlmSpec,
    default_token_targets,
    mlperf_token_targets,
)
from loadgen.device import bind_device
from loadgen.gate import ACCURACY_LOG
from loadgen.llm.engines import TokenGenerator, refuse_slowdown
from loadgen.llm.gate import run_token_gate
from loadgen.llm.prompts import make_prompts, warmup_prompt
from loadgen.llm.sut import TokenSut
from loadgen.llm.tokens import token_metrics
from loadgen.llm_sizes import VARIANTS
from loadgen.models.catalog import WEIGHT_SEED
from loadgen.result import write_result
from loadgen.runrecord import (
    DETAIL_LOG,
    MS_TO_NS,
    RunRecord,
    completion_timeline,
    fresh_out_dir,
    loadgen_settings,
    log_settings,
)
from loadgen.spec import Spec
from loadgen.sync import StdinSync
from loadgen.telemetry import SERVER_COMMANDS, Telemetry

OFFLINE_HEADROOM = 1.2  # Offline's expected rate, over the warm-up's
RATE_PROBE_ANSWERS = 8


def token_targets(spec: Spec) -> tuple[float, float] | None:
    """(TTFT, TPOT) p99 targets in ms: the spec's, else the tiny model's scaled ones, else
    MLPerf's (a declared llama size behind a serving endpoint)."""
    scenario = spec.loadgen.scenario
    if scenario not in TOKEN_SCENARIOS:
        return None
    llm = spec.llm or LlmSpec()
    ttft, tpot = default_token_targets(spec.model.variant, scenario)
    return (llm.ttft_ms or ttft, llm.tpot_ms or tpot)


def token_settings(spec: Spec, count: int, warm_rate: float | None) -> Any:
    loadgen = spec.loadgen
    if loadgen.scenario == "Interactive":
        loadgen = replace(loadgen, scenario="Server")
    if loadgen.scenario == "Offline" and loadgen.target_qps is None and warm_rate:
        loadgen = replace(loadgen, target_qps=warm_rate * OFFLINE_HEADROOM)
    settings = loadgen_settings(loadgen, count)
    settings.use_token_latencies = True
    targets = token_targets(spec)
    if targets is not None:
        settings.ttft_latency = round(targets[0] * MS_TO_NS)
        settings.tpot_latency = round(targets[1] * MS_TO_NS)
    return settings


def open_generator(spec: Spec) -> TokenGenerator:
    """The spec's engine; batch_size is how many sequences it generates at once (one
    worker thread each), backend.in_flight the same for an endpoint."""
    variant = spec.model.variant or "tiny"
    b = spec.backend
    if b.name in ("torch", "openai"):
        refuse_slowdown(spec.slowdown, b.name)
    if b.name == "torch":
        from loadgen.llm.torch_engine import TorchGenerator

        return TorchGenerator(variant, WEIGHT_SEED, b.threads, spec.device.kind,
                              spec.batch_size)
    if b.name == "openai":
        from loadgen.llm.openai_client import OpenAIGenerator

        return OpenAIGenerator.connect(b.url, b.model_name, b.in_flight or 1, variant,
                                       spec.cache_dir)
    from loadgen.llm.engines import OrtGenerator
    from loadgen.models import build_model

    path = build_model(LLM_MODEL, variant, spec.model.precision, spec.cache_dir)
    return OrtGenerator(str(path), variant, b.threads, spec.device.kind, spec.batch_size,
                        spec.slowdown)


def _warm_up(generator: TokenGenerator, spec: Spec, llm: LlmSpec) -> float | None:
    """Warm-up answers, then a few timed ones; returns their rate (answers per second),
    which sizes Offline's query when the spec gives no target_qps."""
    prompt = warmup_prompt(spec.seed, llm, VARIANTS[spec.model.variant or "tiny"].vocab_size)
    for _ in range(spec.warmup_queries):
        generator.generate(prompt, llm.max_output_tokens)
    started = time.perf_counter()
    for _ in range(RATE_PROBE_ANSWERS):
        generator.generate(prompt, llm.max_output_tokens)
    elapsed = time.perf_counter() - started
    return RATE_PROBE_ANSWERS * max(1, generator.concurrency) / elapsed if elapsed else None


def _run_loadgen(state: RunRecord, sut: TokenSut, spec: Spec, warm_rate: float | None) -> None:
    count = len(sut.prompts)
    handle = lg.ConstructSUT(sut.issue_queries, sut.flush_queries)
    loaded: list[tuple[float, float]] = []
    qsl = lg.ConstructQSL(count, min(count, spec.loadgen.performance_sample_count),
                          lambda _: loaded.append((time.time(), time.process_time())),
                          lambda _: None)
    called, called_cpu = time.time(), time.process_time()
    server_cpu = getattr(sut.generator, "server_cpu_seconds", lambda: None)
    server_before = server_cpu()
    try:
        lg.StartTestWithLogSettings(handle, qsl, token_settings(spec, count, warm_rate),
                                    log_settings(state.out_dir))
    finally:
        ended, ended_cpu = time.time(), time.process_time()
        sut.stop()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(handle)
    last = sut.completions[-1][0] if sut.completions else ended
    state.timed = (loaded[0][0] if loaded else called, last)
    # this process's CPU (every thread) from LoadGen's start of the timed part to its end
    state.timed_cpu_s = ended_cpu - (loaded[0][1] if loaded else called_cpu)
    server_after = server_cpu()
    state.sut = {"batch_size": spec.batch_size, "batches": sut.completed_samples,
                 "completed_samples": sut.completed_samples,
                 "failed_samples": sut.failed_samples, "output_tokens": sut.output_tokens,
                 "unique_prompt_prefix": sut.unique_prefix_vocab is not None,
                 "completions": completion_timeline(sut.completions, state.timed[0])}
    if server_before is not None and server_after is not None:
        # the loopback server's CPU from LoadGen's start to its end (a little more than
        # the timed part: the test's start and the report are in it)
        state.sut["loopback_server_cpu_seconds"] = server_after - server_before
    if sut.error:
        state.reason = sut.error


def run_llm(spec: Spec, out_dir: str | Path, sync: StdinSync | None = None,
            engine: Callable[[Spec], TokenGenerator] | None = None) -> dict[str, Any]:
    """Run a model-llm spec and write ``out_dir/result.json``; returns the record.
    ``engine`` replaces the spec's generator (benchmarks/harness_ceiling.py times the SUT
    around one that costs nothing)."""
    out = fresh_out_dir(out_dir)
    binding = bind_device(spec.device)
    state = RunRecord(spec, out)
    llm = spec.llm or LlmSpec()
    variant = spec.model.variant or "tiny"
    generator: TokenGenerator | None = None
    sut: TokenSut | None = None
    telemetry: Telemetry | None = None
    try:
        prompts = make_prompts(spec.seed, spec.loadgen.performance_sample_count, llm,
                               VARIANTS[variant].vocab_size)
        state.model = {"path": None, "builtin": True, "variant": variant,
                       "inputs": [{"name": "input_ids", "dtype": "int64", "shape": [1, None]}],
                       "outputs": [{"name": "next_token", "dtype": "int64", "shape": [1]}]}
        generator = (engine or open_generator)(spec)
        state.backend = generator.describe()
        warm_rate = _warm_up(generator, spec, llm)
        telemetry = Telemetry(spec.device, servers=SERVER_COMMANDS.get(spec.backend.name, ()))
        if sync is not None:
            sync.ready()
            state.sync = sync.wait_for_go()
        telemetry.start()
        # a serving endpoint may cache prefixes: no query repeats another's prompt there
        sut = TokenSut(generator, prompts, llm.max_output_tokens,
                       VARIANTS[variant].vocab_size if spec.backend.name == "openai" else None)
        _run_loadgen(state, sut, spec, warm_rate)
        state.telemetry = telemetry.stop()
        state.telemetry["host"]["process_cpu_seconds_timed"] = state.timed_cpu_s
        telemetry = None
        if spec.accuracy is not None and state.reason is None and variant == "tiny":
            state.accuracy = run_token_gate(generator, prompts, llm, spec.accuracy, variant,
                                            WEIGHT_SEED, out / ACCURACY_LOG)
    except Exception as exc:
        state.fail(exc)
    finally:
        if telemetry is not None:
            state.telemetry = telemetry.stop()
        if generator is not None:
            generator.close()
    record = state.record(binding)
    timed = state.timed
    record["tokens"] = token_metrics(
        out / DETAIL_LOG, spec.loadgen.scenario, sut.timings if sut else [],
        (timed[1] - timed[0]) if timed[0] and timed[1] else None, token_targets(spec),
        mlperf_token_targets(spec.model.variant).get(spec.loadgen.scenario))
    if spec.loadgen.scenario == "Interactive":
        record["scenario"] = "Interactive"
    write_result(out, record)
    return record
