"""What a scenario's inference workload becomes on the devices at hand, and the harness
SPEC for one instance. On a CPU-only machine a GPU study cannot be measured, only
exercised: the duration falls to the workload's ``cpu_duration_s`` and built-in models
without an explicit variant use their ``tiny`` variant. Every such change is recorded as
a note, printed and stored with the run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from loadgen.contract import (
    DEFAULT_ACCURACY_SAMPLES,
    INFERENCE_MODELS,
    LLM_MODEL,
    MLPERF_TOKEN_TARGETS_MS,
    RUN_TO_TTFT,
    TOKEN_SCENARIOS,
    AccuracySpec,
    BackendSpec,
    DeviceSpec,
    InferenceRunSpec,
    LlmSpec,
    LoadgenSpec,
    ModelSpec,
    StabilitySpec,
    capacity_run_seconds,
    default_token_targets,
    is_builtin_model,
    mlperf_token_targets,
)
from vgpu.bench.runlength import GPU_MAX_RUN_S, GPU_MIN_RUN_S, GPU_UNPROBED_RUN_S
from vgpu.defaults import DEFAULT_MAX_CLOCK_OFFSET_MS
from vgpu.model.scenario import InferenceWorkload

CPU_VARIANT = dict.fromkeys(INFERENCE_MODELS, "tiny")
PERFORMANCE_SAMPLES = 256
GPU_STABILITY_PCT = 5.0
CPU_STABILITY_PCT = 15.0  # shared CPU cores wander more between windows than a GPU
STABILITY_MAX_WINDOWS = 6
# A warm-up window is 1/40 of the run, within these bounds.
STABILITY_WINDOW_MS = (250, 5000)
MLPERF_MIN_DURATION_S = 600.0  # what LoadGen's mlperf.conf requires of every scenario


@dataclass(frozen=True)
class BenchOverrides:
    duration_s: float | None = None
    full_models: bool = False  # keep the scenario's model sizes on a CPU
    triton_url: str | None = None
    seed: int = 0
    min_valid: int | None = None  # --min-valid: fewest VALID repeats for a PASS
    mlperf_rules: bool = False  # LoadGen's official settings (--mlperf-rules)
    max_clock_offset_ms: float = DEFAULT_MAX_CLOCK_OFFSET_MS  # remote targets' clocks
    until_decided: bool = False  # --until-decided: repeat until the verdict decides
    max_repeats: int | None = None  # --max-repeats: cap of --until-decided / --budget
    budget_s: float | None = None  # --budget: wall time spread over the workloads
    slowdown: float = 0.0  # --inject-slowdown: known share taken away (calibration only)
    # --simulated-gpu: this machine's CPU instances paced as a GPU of their planned slices
    # (loadgen.backends.simulated_device), timed by a GPU's rules
    simulated_gpu: bool = False
    # the comparisons the command judges as one family (set by the command, not a flag):
    # a series' looks stop on a FAIL only at its share of the 2.5%; None: this run's
    # workloads
    family: int | None = None


@dataclass
class EffectiveWorkload:
    label: str
    model: str
    variant: str | None
    precision: str
    backend: str
    scenario: str
    batch: int
    target_qps: float | None
    target_latency_ms: float | None
    duration_s: float
    triton_url: str | None = None
    accuracy_target: float | None = None
    accuracy_dataset: str | None = None
    accuracy_samples: int = DEFAULT_ACCURACY_SAMPLES
    stability_pct: float = GPU_STABILITY_PCT
    min_valid: int | None = None
    triton_urls: dict[str, str] = field(default_factory=dict)  # instance -> its server
    triton: dict[str, Any] = field(default_factory=dict)  # the servers, as stored
    notes: list[str] = field(default_factory=list)
    mlperf_rules: bool = False
    rules_duration_s: float | None = None  # --duration under the rules: not compliant
    slowdown: float = 0.0  # injected on purpose (--inject-slowdown): never a real result
    llm: LlmSpec | None = None  # model llm's token workload
    openai_url: str | None = None  # backend openai: the serving endpoint (unset: loopback)
    # on a GPU without an explicit duration: the Offline probe sizes the run length from
    # the rate's stability (vgpu.bench.runlength), up to ``duration_upper_s``
    sized_by_stability: bool = False
    duration_upper_s: float | None = None
    simulated_gpu: bool = False  # the CPU computes, completions paced as a GPU's

    @property
    def key(self) -> str:
        """The workload as stored: the name plus what was actually run, so that a CPU
        functional run is never compared with a GPU measurement of the same name."""
        model = self.model if self.variant is None else f"{self.model}/{self.variant}"
        rules = ", MLPerf rules" if self.mlperf_rules else ""
        slowed = f", injected slowdown {self.slowdown:.0%}" if self.slowdown else ""
        searched = ", capacity at the SLO" if self.capacity_search else ""
        simulated = ", SIMULATED GPU" if self.simulated_gpu else ""
        return (f"{self.label} ({model} {self.precision} {self.scenario} b{self.batch} "
                f"{self.backend}{rules}{searched}{simulated}{slowed})")

    @property
    def capacity_search(self) -> bool:
        """Model llm's Server/Interactive measured as capacity at the SLO, never compared
        with a LoadGen run at a fixed rate of the same name."""
        return self.llm is not None and self.llm.capacity is not None and \
            self.scenario in TOKEN_SCENARIOS

    @property
    def deploys_triton(self) -> bool:
        """A Triton workload without an existing server (--triton-url) gets its own."""
        return self.backend == "triton" and self.triton_url is None

    def detail(self) -> dict[str, Any]:
        detail = {
            "label": self.label, "model": self.model, "variant": self.variant,
            "precision": self.precision, "backend": self.backend,
            "loadgen_scenario": self.scenario, "batch": self.batch,
            "target_qps": self.target_qps, "target_latency_ms": self.target_latency_ms,
            "duration_s": self.duration_s, "stability_pct": self.stability_pct,
            "notes": list(self.notes),
        }
        if self.slowdown:
            detail["injected_slowdown"] = self.slowdown
        if self.simulated_gpu:
            detail["simulated_gpu"] = True
        if self.llm is not None:
            detail["llm"] = self.llm.to_json()
        if self.accuracy_target is not None:
            detail["accuracy"] = {"target": self.accuracy_target,
                                  "dataset": self.accuracy_dataset,
                                  "samples": self.accuracy_samples}
        if self.backend == "triton":
            detail["triton"] = self.triton or {"url": self.triton_url, "deployed": False}
        if self.mlperf_rules:
            detail["mlperf_rules"] = {"applied": True,
                                      "source": "mlperf_loadgen built-in mlperf.conf",
                                      "shortened_duration_s": self.rules_duration_s,
                                      "compliant": self.rules_duration_s is None}
        return detail


def effective_workload(
    workload: InferenceWorkload, on_cpu: bool, overrides: BenchOverrides
) -> EffectiveWorkload:
    notes: list[str] = []
    sized, upper = False, workload.duration_s
    variant = workload.variant
    builtin = is_builtin_model(workload.model)
    if on_cpu and builtin and variant is None and not overrides.full_models:
        variant = CPU_VARIANT[workload.model]
        notes.append(f"CPU only: model {workload.model} uses its '{variant}' variant "
                     "(pass --full-models to keep the full size)")
    precision = workload.precision
    if on_cpu and workload.backend == "torch" and precision == "fp16":
        precision = "fp32"
        notes.append("CPU only: torch runs fp16 on CUDA only, so this CPU run uses fp32")
    if overrides.mlperf_rules and workload.model == LLM_MODEL:
        notes.append("MLPerf rules: not applied to model llm (mlperf.conf's llama rules are "
                     "for the real llama models); its token targets apply")
    if overrides.mlperf_rules:
        notes.append(_rules_note(overrides.duration_s))
        duration = overrides.duration_s or MLPERF_MIN_DURATION_S
    elif overrides.duration_s is not None:
        duration = overrides.duration_s
        notes.append(f"duration {workload.duration_s:g} s -> {duration:g} s (--duration)")
    elif on_cpu and not overrides.simulated_gpu:
        duration = workload.cpu_duration_s
        notes.append(f"CPU only: duration {workload.duration_s:g} s -> {duration:g} s "
                     "(the workload's cpu_duration_s)")
    else:
        duration = workload.duration_s
        sized = "duration_s" not in workload.model_fields_set and \
            workload.model not in (LLM_MODEL,)
        if sized:
            upper = duration
            duration = min(duration, GPU_UNPROBED_RUN_S)
            notes.append(
                f"GPU: the run length follows the rate's stability measured by the Offline "
                f"probe ({GPU_MIN_RUN_S:g}-{min(upper, GPU_MAX_RUN_S):g} s; "
                f"{duration:g} s without a probe), not {upper:g} s: MLPerf's rule for a "
                f"published figure, which --mlperf-rules keeps")
    if overrides.slowdown:
        notes.append(f"INJECTED SLOWDOWN: each batch takes 1/(1 - {overrides.slowdown:g}) as "
                     "long (--inject-slowdown, for calibrating verdicts: not a measurement)")
    if overrides.simulated_gpu:
        notes.append("SIMULATED GPU (--simulated-gpu): the CPU computes each batch, the "
                     "completions are paced as a device of the instance's planned slices "
                     "with a GPU's run-to-run noise; proves the design, measures no GPU")
    timed_on_cpu = on_cpu and not overrides.simulated_gpu
    stability = workload.stability_pct
    if stability is None:
        stability = CPU_STABILITY_PCT if timed_on_cpu else GPU_STABILITY_PCT
        if timed_on_cpu:
            notes.append(f"CPU only: warm-up windows must agree within {stability:g}% "
                         f"(on a GPU {GPU_STABILITY_PCT:g}%): shared CPU cores are noisier")
    llm = _cpu_token_targets(workload, on_cpu, notes)
    return EffectiveWorkload(
        label=workload.label, model=workload.model, variant=variant,
        precision=precision, backend=workload.backend, scenario=workload.scenario,
        batch=workload.batch, target_qps=workload.target_qps,
        target_latency_ms=workload.target_latency_ms, duration_s=duration,
        triton_url=overrides.triton_url, notes=notes,
        accuracy_target=workload.accuracy_target, accuracy_dataset=workload.accuracy_dataset,
        accuracy_samples=workload.accuracy_samples, mlperf_rules=overrides.mlperf_rules,
        rules_duration_s=overrides.duration_s if overrides.mlperf_rules else None,
        stability_pct=stability, min_valid=overrides.min_valid or workload.min_valid,
        slowdown=overrides.slowdown, llm=llm, openai_url=workload.url,
        sized_by_stability=sized, duration_upper_s=upper if sized else None,
        simulated_gpu=overrides.simulated_gpu,
    )


def _cpu_token_targets(workload: InferenceWorkload, on_cpu: bool,
                       notes: list[str]) -> LlmSpec | None:
    """On a CPU the tiny decoder's tight token-latency targets would judge the shared cores'
    stalls, not the model: without targets of its own a Server/Interactive workload gets
    MLPerf's (which the tiny model meets with a wide margin where nothing stalls). A
    capacity search's TTFT target is at most a RUN_TO_TTFT-th of its runs, so its capacity
    is the rate the server sustains, not one whose queue merely outgrew a short run."""
    llm = workload.llm_spec()
    if llm is None or workload.scenario not in MLPERF_TOKEN_TARGETS_MS:
        return llm
    if on_cpu and llm.ttft_ms is None and llm.tpot_ms is None:
        ttft, tpot = mlperf_token_targets(workload.variant)[workload.scenario]
        why = "shared CPU cores stall for longer than the model takes"
        if llm.capacity is not None:
            ttft = min(ttft, llm.capacity.duration_s * 1e3 / RUN_TO_TTFT)
            why += (f"; TTFT at most a {RUN_TO_TTFT}th of a capacity run's "
                    f"{llm.capacity.duration_s:g} s")
        notes.append(f"CPU only: token-latency targets TTFT p99 {ttft:g} ms, TPOT p99 "
                     f"{tpot:g} ms (MLPerf's {workload.scenario} TPOT; on a GPU the tiny "
                     f"model's tenth of MLPerf's): {why}")
        llm = replace(llm, ttft_ms=ttft, tpot_ms=tpot)
    return _capacity_runs_outlast_ttft(llm, workload, notes)


def _capacity_runs_outlast_ttft(llm: LlmSpec, workload: InferenceWorkload,
                                notes: list[str]) -> LlmSpec:
    capacity = llm.capacity
    if capacity is None:
        return llm
    ttft = llm.ttft_ms or default_token_targets(workload.variant, workload.scenario)[0]
    seconds = capacity_run_seconds(capacity.duration_s, ttft)
    if seconds == capacity.duration_s:
        return llm
    notes.append(f"capacity runs of {seconds:g} s, not capacity.duration_s "
                 f"{capacity.duration_s:g} s: a run lasts at least {RUN_TO_TTFT} TTFT targets "
                 f"({ttft:g} ms), or an overloaded server's growing queue could pass for "
                 "capacity")
    return replace(llm, capacity=replace(capacity, duration_s=seconds))


def stability_spec(workload: EffectiveWorkload, duration_s: float) -> StabilitySpec:
    low, high = STABILITY_WINDOW_MS
    window = min(high, max(low, round(duration_s * 1000 / 40)))
    return StabilitySpec(pct=workload.stability_pct, window_ms=window,
                         max_windows=STABILITY_MAX_WINDOWS)


def _rules_note(duration_s: float | None) -> str:
    rules = ("MLPerf rules: LoadGen's official settings from its built-in mlperf.conf "
             "(seeds, min duration 600 s, min query counts, latency targets)")
    if duration_s is None:
        return rules
    return (f"{rules}, but --duration {duration_s:g} s shortens the min duration: "
            "not a compliant run")


def _device(section: DeviceSpec | Mapping[str, Any]) -> DeviceSpec:
    if isinstance(section, DeviceSpec):
        return section
    return DeviceSpec(kind=str(section["kind"]), index=section.get("index"),
                      uuid=section.get("uuid"))


def harness_spec(
    workload: EffectiveWorkload,
    *,
    instance: str,
    device: DeviceSpec | Mapping[str, Any],
    threads: int | None,
    seed: int = 0,
    target_qps: float | None = None,
    duration_s: float | None = None,
    min_query_count: int = 1,
    cache_dir: str | None = None,
    accuracy: bool = True,
    stability: bool = True,
    repeat: int = 0,
    start_qps: float | None = None,
) -> InferenceRunSpec:
    """The harness run spec for one instance (docs/harness.md); ``device`` is a target's
    device section. Ship it as ``to_json()``. A workload with an accuracy target gets its
    accuracy pass unless ``accuracy`` is False (a calibration probe, which never runs
    under the MLPerf rules either: it only measures a rate); every run gets its stability
    window unless ``stability`` is False (a probe again). A capacity search sends the
    arrival pattern of ``repeat``, so both sides of an interleaved block send the same,
    from ``start_qps`` when given (else the workload's)."""
    model = ModelSpec(workload.model, workload.variant, workload.precision)
    url = None
    if workload.backend == "triton":
        url = workload.triton_urls.get(instance, workload.triton_url)
    if workload.backend == "openai":
        url = workload.openai_url
    return InferenceRunSpec(
        model=model,
        backend=BackendSpec(workload.backend, threads=threads, url=url),
        device=_device(device),
        loadgen=LoadgenSpec(
            scenario=workload.scenario,
            min_duration_ms=max(1, round((duration_s or workload.duration_s) * 1000)),
            min_query_count=min_query_count,
            target_qps=target_qps if target_qps is not None else workload.target_qps,
            target_latency_ms=workload.target_latency_ms,
            performance_sample_count=PERFORMANCE_SAMPLES,
            **_rules_fields(workload, accuracy),
        ),
        batch_size=workload.batch,
        seed=seed,
        instance_name=instance,
        cache_dir=cache_dir,
        accuracy=_accuracy_spec(workload) if accuracy else None,
        stability=stability_spec(workload, duration_s or workload.duration_s)
        if stability else None,
        slowdown=workload.slowdown,
        llm=_for_repeat(workload.llm, repeat, start_qps),
    )


def _for_repeat(llm: LlmSpec | None, repeat: int,
                start_qps: float | None = None) -> LlmSpec | None:
    if llm is None or llm.capacity is None:
        return llm
    start = llm.capacity.start_qps if start_qps is None else start_qps
    return replace(llm, capacity=replace(llm.capacity, repeat=repeat, start_qps=start))


def _rules_fields(workload: EffectiveWorkload, real_run: bool) -> dict[str, Any]:
    if not (workload.mlperf_rules and real_run) or workload.llm is not None:
        return {}
    shorter = workload.rules_duration_s
    return {"mlperf_rules": True,
            "mlperf_min_duration_ms": None if shorter is None else max(1, round(shorter * 1000))}


def _accuracy_spec(workload: EffectiveWorkload) -> AccuracySpec | None:
    if workload.accuracy_target is None:
        return None
    return AccuracySpec(target=workload.accuracy_target, dataset=workload.accuracy_dataset,
                        samples=workload.accuracy_samples)
