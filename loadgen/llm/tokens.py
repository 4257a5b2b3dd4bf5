"""The token metrics of a run, under the names a lab's LLM tools use (NVIDIA AIPerf and
``vllm bench serve``: time_to_first_token, inter_token_latency, output_token_throughput)
with the MLPerf LoadGen keys each comes from. LoadGen measures TTFT and TPOT in Server and
Interactive; in Offline it reports tokens/s only, and the latencies are the SUT's clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from loadgen.llm.sut import SequenceTiming
from loadgen.mllog import read_entries

NS_TO_MS = 1e-6
PERCENTILES = {"p50": "50.00", "p90": "90.00", "p99": "99.00"}
# AIPerf / vllm name -> (MLPerf LoadGen key pattern, what LoadGen calls it)
MLPERF_NAMES = {
    "time_to_first_token": ("result_first_token_{pct}_percentile_latency_ns", "TTFT"),
    "inter_token_latency": ("result_time_per_output_token_{pct}_percentile_ns", "TPOT"),
    "output_token_throughput": ("result_completed_tokens_per_second (Server) / "
                                "result_tokens_per_second (Offline)", "tokens/s"),
}


def _values(detail_log: Path) -> dict[str, Any]:
    return {e.get("key", ""): e.get("value") for e in read_entries(detail_log)}


def _loadgen_latency(values: dict[str, Any], pattern: str, mean_key: str) -> dict[str, Any]:
    out = {name: values.get(pattern.format(pct=pct)) for name, pct in PERCENTILES.items()}
    out["mean"] = values.get(mean_key)
    return {k: None if v is None else v * NS_TO_MS for k, v in out.items()}


def _percentiles(samples: list[float]) -> dict[str, float | None]:
    if not samples:
        return dict.fromkeys([*PERCENTILES, "mean"])
    data = np.asarray(samples) * 1e3
    out: dict[str, float | None] = {name: float(np.percentile(data, float(pct)))
                                    for name, pct in PERCENTILES.items()}
    out["mean"] = float(data.mean())
    return out


def token_gaps(timings: list[SequenceTiming]) -> dict[str, float | int | None]:
    """Every gap between a query's successive tokens, as the SUT saw them arrive (ms):
    p99, p99.9 and the longest stall. TPOT is a query's mean gap, in which a periodic
    stall disappears; these keep it."""
    gaps = [g for t in timings for g in t.gaps]
    if not gaps:
        return {"p99": None, "p99.9": None, "longest": None, "samples": 0}
    data = np.asarray(gaps) * 1e3
    return {"p99": float(np.percentile(data, 99.0, method="higher")),
            "p99.9": float(np.percentile(data, 99.9, method="higher")),
            "longest": float(data.max()), "samples": len(gaps)}


def sut_clock(timings: list[SequenceTiming]) -> dict[str, Any]:
    """TTFT from a query's arrival to its first token and ITL over the rest of its tokens,
    as the SUT saw them (ms)."""
    ttft = [t.first - t.issued for t in timings if t.first is not None]
    itl = [(t.done - t.first) / (t.tokens - 1) for t in timings
           if t.first is not None and t.done is not None and t.tokens > 1]
    return {"time_to_first_token_ms": _percentiles(ttft),
            "inter_token_latency_ms": _percentiles(itl)}


def token_metrics(detail_log: Path | None, scenario: str, timings: list[SequenceTiming],
                  timed_s: float | None, targets_ms: tuple[float, float] | None,
                  mlperf_targets_ms: tuple[float, float] | None) -> dict[str, Any]:
    """The record's ``tokens`` section."""
    values = _values(detail_log) if detail_log is not None and detail_log.exists() else {}
    clock = sut_clock(timings)
    output_tokens = sum(t.tokens for t in timings)
    rate_key = "result_tokens_per_second" if scenario == "Offline" else \
        "result_completed_tokens_per_second"
    loadgen_rate = values.get(rate_key)
    by_loadgen = scenario != "Offline" and \
        values.get("result_first_token_50.00_percentile_latency_ns") is not None
    record: dict[str, Any] = {
        "source": "loadgen" if by_loadgen else "sut",
        "output_tokens": output_tokens,
        "sequences": len(timings),
        "output_token_throughput": loadgen_rate if loadgen_rate is not None else (
            output_tokens / timed_s if timed_s else None),
        "output_token_throughput_source": rate_key if loadgen_rate is not None else "sut",
        "mlperf_names": {k: v[1] for k, v in MLPERF_NAMES.items()},
        "sut_clock": clock,
        "inter_token_gap_ms": token_gaps(timings),
        "targets_ms": None if targets_ms is None else
        {"ttft_p99": targets_ms[0], "tpot_p99": targets_ms[1]},
        "mlperf_targets_ms": None if mlperf_targets_ms is None else
        {"ttft_p99": mlperf_targets_ms[0], "tpot_p99": mlperf_targets_ms[1]},
    }
    if by_loadgen:
        record["time_to_first_token_ms"] = _loadgen_latency(
            values, MLPERF_NAMES["time_to_first_token"][0], "result_first_token_mean_latency_ns")
        record["inter_token_latency_ms"] = _loadgen_latency(
            values, MLPERF_NAMES["inter_token_latency"][0], "result_time_to_output_token_mean")
    else:
        record |= clock
    return record
