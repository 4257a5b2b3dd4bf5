"""The token metrics of an LLM repeat (model llm), stored per instance and for the run:
output tokens/s (per instance and summed), time to first token and inter-token latency
(p50, p99 per instance; the run's p99 is the worst instance's). Names follow AIPerf / ``vllm bench
serve``; MLPerf LoadGen calls them TTFT, TPOT and tokens/s (docs/bench.md). At a fixed
offered rate (Server, Interactive) tokens/s is what was asked for, so the run's sum is not
stored there and no verdict judges it; capacity at the SLO does (vgpu.results.verdict.capacity)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loadgen.contract import OUTPUT_TOKEN_THROUGHPUT, TOKEN_LATENCIES, RunResult, metrics_of
from vgpu.results.store.records import Metric

TTFT = "time_to_first_token"
ITL = "inter_token_latency"
TOKENS_PER_S = "tokens/s"
FIXED_RATE_SCENARIOS = ("Server", "Interactive")  # tokens/s follows the offered rate
LATENCY_METRICS = TOKEN_LATENCIES  # metric name -> (kind, percentile), as metrics_of names them
TTFT_P99 = f"{TTFT}_p99"
ITL_P99 = f"{ITL}_p99"
# What a verdict judges (the run's value: the system's tokens/s in Offline, the worst
# instance's p99, as MLPerf's constraints are p99); the p50s are stored per instance and
# shown.
TOKEN_METRICS = (OUTPUT_TOKEN_THROUGHPUT, TTFT_P99, ITL_P99)


def token_metrics(results: Mapping[str, RunResult]) -> list[Metric]:
    """Per instance and run-level metrics from the harness results that carry ``tokens``
    (Offline has no first-token latency: metrics_of leaves it out there)."""
    metrics: list[Metric] = []
    total = 0.0
    worst: dict[str, float] = {}
    counted = 0
    for instance, result in results.items():
        if not result.has_tokens:
            continue
        values = metrics_of(result)
        if OUTPUT_TOKEN_THROUGHPUT in values:
            rate = values[OUTPUT_TOKEN_THROUGHPUT]
            metrics.append(Metric(OUTPUT_TOKEN_THROUGHPUT, rate, TOKENS_PER_S, instance))
            total += rate
            counted += 1
        for name in LATENCY_METRICS:
            if name in values:
                metrics.append(Metric(name, values[name], "ms", instance))
                worst[name] = max(worst.get(name, values[name]), values[name])
    fixed_rate = any(r.scenario in FIXED_RATE_SCENARIOS for r in results.values())
    if counted and counted == len(results) and not fixed_rate:
        metrics.append(Metric(OUTPUT_TOKEN_THROUGHPUT, total, TOKENS_PER_S))
    metrics += [Metric(name, value, "ms") for name, value in worst.items()
                if name in TOKEN_METRICS]
    return metrics


def tolerances(ttft_pct: float, tpot_pct: float) -> dict[str, float]:
    """The per-metric bands of the token metrics (fractions); tokens/s uses the
    throughput band."""
    return {TTFT_P99: ttft_pct / 100.0, ITL_P99: tpot_pct / 100.0}


def outcome_results(outcomes: Sequence[Any]) -> dict[str, RunResult]:
    return {o.target.instance: o.result for o in outcomes}
