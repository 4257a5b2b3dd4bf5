"""Which backends, variants, scenarios and fields go with model llm, stated once for both
sides of the contract: vgpu's scenario files (vgpu.model.scenario) and the harness's run
specs (loadgen.spec). Standard library only. Each side names its own fields: the rules
take a mapping from a role (:data:`ROLES`) to that side's field name and say every
problem with the field to change and how."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

LLM_MODEL = "llm"
TOKEN_SCENARIOS = ("Server", "Interactive")  # LoadGen scenarios that judge token latencies
LLM_SCENARIOS = ("Offline", *TOKEN_SCENARIOS)
LLM_BACKENDS = ("onnxruntime", "torch", "openai")
# a capacity search's client: most queries in flight at once (vllm bench serve's
# --max-concurrency); a query waiting for a place waits on the run's clock
CLIENT_CONCURRENCY = 256
# A capacity run's arrivals last at least this many TTFT targets. An overloaded server's
# queue grows for the whole run; a run of T seconds with a TTFT target L can stay VALID up
# to about (1 + L/T) x the rate it sustains, so with 10 targets the capacity found is within
# 10% of the sustainable rate (a 2 s run against a 2 s target could report twice it).
RUN_TO_TTFT = 10
IN_PROCESS_VARIANT = "tiny"  # the only variant that runs without a serving endpoint
# role -> what it is; each side maps every role to its own field name
ROLES = ("model", "backend", "url", "variant", "scenario", "target_qps", "accuracy",
         "mlperf_rules", "llm", "capacity")


@dataclass(frozen=True)
class LlmProblem:
    """A broken rule: the field (a side's name for a role), what is wrong and the fix."""

    field: str
    message: str
    fix: str


@dataclass(frozen=True)
class LlmWorkload:
    """What the rules look at, as either side states it. ``llm_fields``: the llm-only
    fields given (max_output_tokens, input_tokens, ttft_ms, tpot_ms, ...)."""

    model: str
    backend: str
    scenario: str
    variant: str | None = None
    url: bool = False
    target_qps: bool = False
    accuracy: bool = False
    mlperf_rules: bool = False
    llm_fields: Sequence[str] = ()
    capacity: bool = False  # measured as capacity at the SLO (loadgen.llm.capacity)


def llm_problems(workload: LlmWorkload, names: Mapping[str, str]) -> list[LlmProblem]:
    """Every rule ``workload`` breaks, in the words of the side whose field ``names``
    (role -> field name) are given."""
    w, n = workload, names
    if w.model != LLM_MODEL:
        return _other_model_problems(w, n)
    found: list[LlmProblem] = []
    if w.scenario not in LLM_SCENARIOS:
        found.append(LlmProblem(n["scenario"], f"model llm runs Offline, Server or "
                                f"Interactive, not {w.scenario}",
                                f"set {n['scenario']} to Offline, Server or Interactive"))
    if w.backend not in LLM_BACKENDS:
        found.append(LlmProblem(n["backend"], "model llm runs on onnxruntime, torch or "
                                "openai", f"set {n['backend']} to openai and {n['url']} to "
                                "the Triton/TensorRT-LLM or vLLM OpenAI-compatible endpoint"))
    elif w.url and w.backend != "openai":
        found.append(LlmProblem(n["url"], f"{n['url']} applies only to backend openai",
                                f"remove {n['url']}, or set {n['backend']} to openai"))
    variant = w.variant or IN_PROCESS_VARIANT
    if variant != IN_PROCESS_VARIANT and not (w.backend == "openai" and w.url):
        found.append(LlmProblem(n["variant"], f"llm {variant} is declared for the memory "
                                "arithmetic and a serving endpoint; only tiny runs "
                                "in-process", f"use variant tiny, or {n['backend']} openai "
                                f"with {n['url']}"))
    if variant != IN_PROCESS_VARIANT and w.accuracy:
        found.append(LlmProblem(n["accuracy"], f"{n['accuracy']} needs the seeded tiny model "
                                f"(exact agreement with its fp32 reference), not llm "
                                f"{variant}", f"remove {n['accuracy']} (score a served llama "
                                "with MLPerf's own accuracy scripts on the exported "
                                "accuracy log)"))
    if w.mlperf_rules:
        found.append(LlmProblem(n["mlperf_rules"], "LoadGen's mlperf.conf has no rules for "
                                "model llm (its llama rules are for the real llama models)",
                                f"remove {n['mlperf_rules']}; set the ttft_ms / tpot_ms "
                                "targets of the llm workload instead"))
    if w.scenario in TOKEN_SCENARIOS and not w.target_qps and not w.capacity:
        found.append(LlmProblem(n["target_qps"], f"{w.scenario} needs the query rate to "
                                "hold, or a capacity search", f"set {n['capacity']}, e.g. "
                                "{start_qps: 50, runs: 9, resolution: 0.025, duration_s: 2}"))
    if w.capacity and w.scenario not in TOKEN_SCENARIOS:
        found.append(LlmProblem(n["capacity"], f"a capacity search is a Server or "
                                f"Interactive measurement, not {w.scenario}'s (Offline "
                                "states tokens/s)", f"remove {n['capacity']}, or set "
                                f"{n['scenario']} to Server"))
    return found


def _other_model_problems(w: LlmWorkload, n: Mapping[str, str]) -> list[LlmProblem]:
    found: list[LlmProblem] = []
    if w.llm_fields:
        found.append(LlmProblem(n["llm"], f"{', '.join(w.llm_fields)} apply only to model "
                                "llm", f"remove {', '.join(w.llm_fields)} or set "
                                f"{n['model']} to llm"))
    if w.backend == "openai":
        found.append(LlmProblem(n["backend"], "backend openai serves only model llm",
                                f"set {n['model']} to llm or choose another backend"))
    if w.scenario == "Interactive":
        found.append(LlmProblem(n["scenario"], "Interactive is the LLM scenario (token "
                                "latencies)", f"use Server for this model, or set "
                                f"{n['model']} to llm"))
    return found


def runs_to_resolve(resolution: float) -> int:
    """The runs a search needs to bisect a doubling bracket (two runs, a factor of 2)
    until it is ``resolution`` wide, the confirming rerun included."""
    bisections = math.ceil(math.log2(math.log(2) / math.log1p(resolution)) - 1e-9)
    return 2 + max(bisections, 0) + 1


def capacity_run_seconds(duration_s: float, ttft_ms: float) -> float:
    """A capacity run's arrival time: ``duration_s``, or :data:`RUN_TO_TTFT` TTFT targets
    where that is longer."""
    return max(duration_s, RUN_TO_TTFT * ttft_ms / 1e3)
