"""What the MLPerf Inference v6.1 submission rules ask of one exported result, read from
the LoadGen logs that are exported: every reason a result is not submittable, in words a
user can act on. vgpu's own gate: the MLCommons checker accepts a result LoadGen marked
INVALID, vgpu does not."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vgpu.results.export.mlperf_system import mlperf_benchmark

MLLOG_PREFIX = ":::MLLOG "
MIN_DURATION_MS = 600_000
OFFICIAL_SEEDS = {"qsl_rng_seed": 2085463073848966840,
                  "sample_index_rng_seed": 2747215439041700203,
                  "schedule_rng_seed": 16159082839903944936}


@dataclass(frozen=True)
class BenchmarkRules:
    performance_sample_count: int
    dataset_size: int
    offline_min_samples: int
    min_queries: dict[str, int]
    required_scenarios: tuple[str, ...]  # of the edge suite, for the closed division
    compliance_tests: tuple[str, ...]  # audit runs the closed division asks for


RULES = {
    "resnet50": BenchmarkRules(1024, 50000, 24576,
                               {"SingleStream": 1024, "MultiStream": 270336,
                                "Server": 270336, "Offline": 1},
                               ("SingleStream", "MultiStream", "Offline"),
                               ("TEST01", "TEST04")),
    "bert-99": BenchmarkRules(10833, 10833, 10833, {"SingleStream": 1024, "Offline": 1},
                              ("SingleStream", "Offline"), ("TEST01",)),
    "bert-99.9": BenchmarkRules(10833, 10833, 10833, {"SingleStream": 1024, "Offline": 1},
                                ("SingleStream", "Offline"), ("TEST01",)),
}


def read_mllog(path: Path) -> dict[str, Any]:
    """key -> value of a LoadGen detail log; ``error`` collects every error line."""
    values: dict[str, Any] = {"error": []}
    if not path.is_file():
        return values
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith(MLLOG_PREFIX):
            continue
        try:
            entry = json.loads(line[len(MLLOG_PREFIX):])
        except json.JSONDecodeError:
            continue
        key = entry.get("key")
        if key == "error":
            values["error"].append(str(entry.get("value")))
        elif isinstance(key, str):
            values[key] = entry.get("value")
    return values


def not_submittable(benchmark: str, scenario: str, division: str, performance: Path,
                    accuracy: Path | None) -> list[str]:
    """Why the result whose logs are ``performance`` (its mlperf_log_detail.txt) and
    ``accuracy`` (the accuracy pass's, or None) cannot be submitted; empty when it can."""
    mlperf = mlperf_benchmark(benchmark)
    rules = RULES.get(mlperf)
    if rules is None:
        return [f"model: {benchmark} is none of the v6.1 benchmarks vgpu exports "
                f"({', '.join(RULES)})"]
    reasons: list[str] = []
    if benchmark != mlperf and division == "closed":
        reasons.append(f"model: {benchmark} is not the {mlperf} reference model; a "
                       "smaller variant is only submittable in the open division")
    if division == "closed":
        reasons.append(f"compliance: the closed division needs the audit runs "
                       f"{', '.join(rules.compliance_tests)} in this result's folder; vgpu "
                       "does not run them")
    log = read_mllog(performance)
    reasons += _performance_reasons(log, rules, scenario, division)
    if accuracy is None:
        reasons.append("accuracy: no accuracy pass (give the workload an accuracy_target)")
    else:
        total = read_mllog(accuracy).get("qsl_reported_total_count")
        if total != rules.dataset_size:
            reasons.append(f"accuracy: the accuracy pass covered {total} samples; {mlperf} "
                           f"needs its whole dataset, {rules.dataset_size} "
                           "(set the workload's accuracy_samples)")
    return reasons


def _performance_reasons(log: dict[str, Any], rules: BenchmarkRules, scenario: str,
                         division: str) -> list[str]:
    reasons = [f"LoadGen error: {text}" for text in log["error"]]
    if log.get("result_validity") != "VALID":
        reasons.append(f"result: LoadGen marked the run {log.get('result_validity')}")
    duration = log.get("effective_min_duration_ms")
    if not isinstance(duration, int) or duration < MIN_DURATION_MS:
        reasons.append(f"duration: min_duration was {duration} ms; the rules ask for "
                       f"{MIN_DURATION_MS} ms (run without --duration under --mlperf-rules)")
    count = log.get("effective_performance_sample_count")
    if not isinstance(count, int) or count < rules.performance_sample_count:
        reasons.append(f"sample count: performance_sample_count was {count}; the rules ask "
                       f"for at least {rules.performance_sample_count}")
    reasons += _query_reasons(log, rules, scenario, division)
    seeds = {key: log.get(f"effective_{key}") for key in OFFICIAL_SEEDS}
    if seeds != OFFICIAL_SEEDS:
        reasons.append("seeds: LoadGen did not run with the official v6.1 seeds "
                       "(run under --mlperf-rules)")
    return reasons


def _query_reasons(log: dict[str, Any], rules: BenchmarkRules, scenario: str,
                   division: str) -> list[str]:
    wanted = rules.min_queries.get(scenario)
    queries = log.get("effective_min_query_count")
    reasons = []
    if wanted is not None and scenario == "Offline" and division == "closed":
        samples = log.get("effective_samples_per_query")
        if not isinstance(samples, int) or samples < rules.offline_min_samples:
            reasons.append(f"sample count: the Offline query had {samples} samples; the "
                           f"closed division asks for {rules.offline_min_samples}")
    if wanted is not None and scenario == "Offline" and \
            (not isinstance(queries, int) or queries < wanted):
        reasons.append(f"query count: min_query_count was {queries}; the rules ask for "
                       f"{wanted}")
    return reasons


def missing_scenarios(benchmark: str, scenarios: set[str]) -> list[str]:
    """The edge-suite scenarios a closed submission of ``benchmark`` lacks."""
    rules = RULES.get(mlperf_benchmark(benchmark))
    return [] if rules is None else [s for s in rules.required_scenarios
                                     if s not in scenarios]
