"""One harness run of model llm's Server/Interactive workload as capacity at the SLO: open
the endpoint (backend openai's url, else vgpu's loopback server of the tiny model, which
the harness starts as it does for backend openai without a url), warm up, wait for the
synchronised start, run the capacity search (loadgen.llm.capacity) with the spec's
budget, then the exact-agreement gate. result.json has the usual fields plus
``capacity``: the search (every rate tried, VALID or not, with goodput, TTFT/TPOT p99,
ITL p99/p99.9 and the longest stall), its SLO, load shape, budget and arrival pattern,
and what the engine says about itself (loadgen.llm.engine_info). The run is VALID when
the search found a VALID rate."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from loadgen.contract import CapacitySpec, LlmSpec, capacity_run_seconds
from loadgen.device import bind_device
from loadgen.errors import RunFailed
from loadgen.gate import ACCURACY_LOG
from loadgen.llm.capacity import CapacityResult, find_capacity
from loadgen.llm.engine_info import cache_summary, describe_engine, scrape_metrics
from loadgen.llm.engines import refuse_slowdown
from loadgen.llm.gate import run_token_gate
from loadgen.llm.open_loop import EndpointClient, endpoint_run
from loadgen.llm.openai_client import LoopbackServer, OpenAIGenerator
from loadgen.llm.prompts import make_prompts, warmup_prompt
from loadgen.llm.run import token_targets
from loadgen.llm.runs import Budget, LoadShape, Slo
from loadgen.llm.server import MODEL_ID
from loadgen.llm_sizes import VARIANTS
from loadgen.models.catalog import WEIGHT_SEED
from loadgen.result import write_result
from loadgen.runrecord import RunRecord, fresh_out_dir
from loadgen.spec import Spec
from loadgen.sync import StdinSync
from loadgen.telemetry import SERVER_COMMANDS, Telemetry


def open_endpoint(spec: Spec) -> OpenAIGenerator:
    """Backend openai's endpoint (its url, or a loopback server); for the in-process
    backends a loopback server of the tiny model with the instance's threads."""
    b = spec.backend
    variant = spec.model.variant or "tiny"
    if b.name == "openai":
        refuse_slowdown(spec.slowdown, b.name)
        return OpenAIGenerator.connect(b.url, b.model_name, b.in_flight or 1, variant,
                                       spec.cache_dir)
    server = LoopbackServer(variant, spec.cache_dir, b.threads or 1, spec.slowdown)
    return OpenAIGenerator(server.url, MODEL_ID, 1, server)


def search_budget(capacity: CapacitySpec, ttft_ms: float) -> Budget:
    """The spec's budget, its runs lengthened to RUN_TO_TTFT TTFT targets where shorter."""
    return Budget(runs=capacity.runs, min_queries=capacity.min_queries,
                  duration_s=capacity_run_seconds(capacity.duration_s, ttft_ms),
                  resolution=capacity.resolution)


def run_search(generator: OpenAIGenerator, spec: Spec, llm: LlmSpec,
               capacity: CapacitySpec) -> tuple[CapacityResult, dict[str, Any]]:
    """The search against the generator's endpoint and its setup, as stored."""
    targets = token_targets(spec)
    if targets is None:
        raise RunFailed(f"a capacity search needs Server or Interactive, not "
                        f"{spec.loadgen.scenario}")
    variant = spec.model.variant or "tiny"
    shape = LoadShape(llm.input_tokens_min, llm.input_tokens_max, llm.max_output_tokens,
                      VARIANTS[variant].vocab_size)
    slo = Slo(*targets)
    budget = search_budget(capacity, slo.ttft_ms)
    client = EndpointClient(generator.url, generator.model, capacity.concurrency)
    result = find_capacity(
        lambda rate, run: endpoint_run(client, rate, run, shape, slo, spec.seed,
                                       capacity.repeat, budget),
        capacity.start_qps, budget)
    setup = {"seed": spec.seed, "repeat": capacity.repeat, "slo_ms": asdict(slo),
             "shape": asdict(shape), "budget": asdict(budget),
             "start_qps": capacity.start_qps, "concurrency": capacity.concurrency}
    return result, setup


def run_capacity(spec: Spec, out_dir: str | Path, sync: StdinSync | None = None) -> dict[str, Any]:
    """Run a model-llm Server/Interactive spec with ``llm.capacity`` and write
    ``out_dir/result.json``; returns the record."""
    out = fresh_out_dir(out_dir)
    binding = bind_device(spec.device)
    state = RunRecord(spec, out)
    llm = spec.llm or LlmSpec()
    capacity = llm.capacity or CapacitySpec()
    variant = spec.model.variant or "tiny"
    vocab = VARIANTS[variant].vocab_size
    generator: OpenAIGenerator | None = None
    telemetry: Telemetry | None = None
    search: dict[str, Any] | None = None
    try:
        state.model = {"path": None, "builtin": True, "variant": variant}
        generator = open_endpoint(spec)
        state.backend = generator.describe()
        prompt = warmup_prompt(spec.seed, llm, vocab)
        for _ in range(spec.warmup_queries):
            generator.generate(prompt, llm.max_output_tokens)
        engine = describe_engine(generator.url)
        telemetry = Telemetry(spec.device, servers=SERVER_COMMANDS.get(spec.backend.name, ()))
        if sync is not None:
            sync.ready()
            state.sync = sync.wait_for_go()
        telemetry.start()
        before = scrape_metrics(generator.url)
        started = time.time()
        result, setup = run_search(generator, spec, llm, capacity)
        state.timed = (started, time.time())
        engine["cache"] = cache_summary(before, scrape_metrics(generator.url))
        state.telemetry = telemetry.stop()
        telemetry = None
        search = {**result.to_json(), **setup, "engine": engine}
        if spec.accuracy is not None and variant == "tiny":
            prompts = make_prompts(spec.seed, spec.accuracy.samples, llm, vocab)
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
    record["scenario"] = spec.loadgen.scenario
    record["capacity"] = search
    if search is not None:
        found = search["capacity_qps"] > 0
        record["validity"] = {"result": "VALID" if found else "INVALID", "reasons": [] if found
                              else [f"no rate from {capacity.start_qps:g}/s down met the SLO: "
                                    f"{search['runs'][-1]['reasons'][0]}"]}
    write_result(out, record)
    return record
