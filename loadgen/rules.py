"""MLPerf rules: LoadGen's official settings for a model and scenario, read from the
``mlperf.conf`` that LoadGen carries built in (``TestSettings.FromConfig`` with conf type
0): the RNG seeds, the minimum duration (600 s) and query counts, the latency targets and
percentiles. On top come only what a submitter's ``user.conf`` sets (the expected QPS or
latency), the QSL size the harness loads, and an explicit shorter duration, which makes
the run no longer compliant and is said so in the record."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg

from loadgen.contract import InferenceRunSpec

BUILT_IN_CONF = 0  # FromConfig's conf_type: LoadGen's embedded mlperf.conf only
MS_TO_NS = 1_000_000
RULE_FIELDS = ("min_duration_ms", "min_query_count", "performance_sample_count_override",
               "qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed",
               "server_target_latency_ns", "server_target_latency_percentile",
               "single_stream_target_latency_percentile",
               "multi_stream_target_latency_percentile", "multi_stream_samples_per_query")


def conf_model(spec: InferenceRunSpec) -> str:
    """The model name mlperf.conf knows: the built-in models are named as there
    (resnet50, bert); an ONNX file gets only the rules that hold for every model."""
    return spec.model.name if spec.model.builtin else Path(spec.model.name).stem


def official_settings(spec: InferenceRunSpec) -> Any:
    """TestSettings holding only the rules for this model and scenario."""
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, spec.loadgen.scenario)
    if settings.FromConfig("", conf_model(spec), spec.loadgen.scenario, BUILT_IN_CONF) != 0:
        raise RuntimeError("LoadGen could not read its built-in mlperf.conf")
    return settings


def ruled_spec(spec: InferenceRunSpec) -> InferenceRunSpec:
    """The spec as the rules run it: the QSL holds the rules' performance sample count
    (resnet50 1024, bert 10833) where mlperf.conf names one."""
    if not spec.loadgen.mlperf_rules:
        return spec
    count = official_settings(spec).performance_sample_count_override
    if count <= 0:
        return spec
    return replace(spec, loadgen=replace(spec.loadgen, performance_sample_count=count))


def mlperf_settings(spec: InferenceRunSpec, performance_count: int) -> Any:
    """The official TestSettings (LoadGen's defaults where mlperf.conf says nothing, not
    the spec's), with the spec's user.conf-level values and mode on top."""
    settings = official_settings(spec)
    settings.mode = getattr(lg.TestMode, spec.loadgen.mode)
    settings.performance_sample_count_override = performance_count
    if spec.loadgen.target_qps is not None:
        settings.offline_expected_qps = spec.loadgen.target_qps
        settings.server_target_qps = spec.loadgen.target_qps
    latency = spec.loadgen.target_latency_ms
    if latency is not None:  # the expected latencies; Server's target is a rule
        settings.single_stream_expected_latency_ns = round(latency * MS_TO_NS)
        settings.multi_stream_expected_latency_ns = round(latency * MS_TO_NS)
    if spec.loadgen.mlperf_min_duration_ms is not None:
        settings.min_duration_ms = spec.loadgen.mlperf_min_duration_ms
    return settings


def rules_record(spec: InferenceRunSpec, performance_count: int) -> dict[str, Any] | None:
    """What result.json says about the rules: None without them; else the official
    values, the ones this run changed and whether it is still compliant."""
    if not spec.loadgen.mlperf_rules:
        return None
    official = official_settings(spec)
    rules = {name: getattr(official, name) for name in RULE_FIELDS}
    deviations: dict[str, Any] = {}
    if spec.loadgen.mlperf_min_duration_ms is not None:
        deviations["min_duration_ms"] = spec.loadgen.mlperf_min_duration_ms
    if rules["performance_sample_count_override"] not in (0, performance_count):
        deviations["performance_sample_count_override"] = performance_count
    return {"applied": True, "source": "mlperf_loadgen built-in mlperf.conf",
            "model": conf_model(spec), "scenario": spec.loadgen.scenario,
            "official": rules, "deviations": deviations,
            "compliant_settings": not deviations}
