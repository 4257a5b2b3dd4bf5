"""The token metrics of an LLM repeat (model llm), stored per instance and for the run:
output tokens/s (per instance and summed), time to first token and inter-token latency
(p50, p99 per instance; the run's p99 is the worst instance's). Names follow AIPerf / ``vllm bench
serve``; MLPerf LoadGen calls them TTFT, TPOT and tokens/s (docs/bench.md). At a fixed
offered rate (Server, Interactive) tokens/s is what was asked for, so the run's sum is not
stored there and no verdict judges it; capacity at the SLO does (vgpu.results.capacity)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vgpu.results.records import Metric

OUTPUT_TOKEN_THROUGHPUT = "output_token_throughput"
TTFT = "time_to_first_token"
ITL = "inter_token_latency"
TOKENS_PER_S = "tokens/s"
FIXED_RATE_SCENARIOS = ("Server", "Interactive")  # tokens/s follows the offered rate
LATENCY_METRICS = {f"{TTFT}_p50": (TTFT, "p50"), f"{TTFT}_p99": (TTFT, "p99"),
                   f"{ITL}_p50": (ITL, "p50"), f"{ITL}_p99": (ITL, "p99")}
TTFT_P99 = f"{TTFT}_p99"
ITL_P99 = f"{ITL}_p99"
# What a verdict judges (the run's value: the system's tokens/s in Offline, the worst
# instance's p99, as MLPerf's constraints are p99); the p50s are stored per instance and
# shown.
TOKEN_METRICS = (OUTPUT_TOKEN_THROUGHPUT, TTFT_P99, ITL_P99)


def _latencies(tokens: Mapping[str, Any], scenario: str | None) -> dict[str, float]:
    """The instance's latency metrics in ms; Offline has no first-token latency worth
    judging (every query arrives at once, so it is the queue's wait)."""
    out: dict[str, float] = {}
    for name, (kind, pct) in LATENCY_METRICS.items():
        if kind == TTFT and scenario == "Offline":
            continue
        value = (tokens.get(f"{kind}_ms") or {}).get(pct)
        if isinstance(value, int | float):
            out[name] = float(value)
    return out


def token_metrics(records: Mapping[str, Mapping[str, Any]]) -> list[Metric]:
    """Per instance and run-level metrics from the harness records that carry ``tokens``."""
    metrics: list[Metric] = []
    total = 0.0
    worst: dict[str, float] = {}
    counted = 0
    for instance, record in records.items():
        tokens = record.get("tokens")
        if not tokens:
            continue
        rate = tokens.get("output_token_throughput")
        if isinstance(rate, int | float):
            metrics.append(Metric(OUTPUT_TOKEN_THROUGHPUT, float(rate), TOKENS_PER_S, instance))
            total += float(rate)
            counted += 1
        for name, value in _latencies(tokens, record.get("scenario")).items():
            metrics.append(Metric(name, value, "ms", instance))
            worst[name] = max(worst.get(name, value), value)
    fixed_rate = any(r.get("scenario") in FIXED_RATE_SCENARIOS for r in records.values())
    if counted and counted == len(records) and not fixed_rate:
        metrics.append(Metric(OUTPUT_TOKEN_THROUGHPUT, total, TOKENS_PER_S))
    metrics += [Metric(name, value, "ms") for name, value in worst.items()
                if name in TOKEN_METRICS]
    return metrics


def tolerances(ttft_pct: float, tpot_pct: float) -> dict[str, float]:
    """The per-metric bands of the token metrics (fractions); tokens/s uses the
    throughput band."""
    return {TTFT_P99: ttft_pct / 100.0, ITL_P99: tpot_pct / 100.0}


def outcome_records(outcomes: Sequence[Any]) -> dict[str, Mapping[str, Any]]:
    return {o.target.instance: o.record or {} for o in outcomes}
