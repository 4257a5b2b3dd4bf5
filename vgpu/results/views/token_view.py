"""The TTFT / TPOT panel of an LLM series: per instance, the mean over the valid repeats of
output tokens/s, time to first token and inter-token latency (p50, p99), and the system's
tokens/s (summed per repeat); shown by `vgpu bench` and the HTML report."""

from __future__ import annotations

from collections import defaultdict
from statistics import fmean
from typing import Any

from vgpu.results.store.series import SeriesData
from vgpu.results.views.format import number

HEADERS = ["instance", "output tokens/s", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms",
           "TPOT p99 ms", "measured by"]
_COLUMNS = (("time_to_first_token_ms", "p50"), ("time_to_first_token_ms", "p99"),
            ("inter_token_latency_ms", "p50"), ("inter_token_latency_ms", "p99"))


def _tokens(inst: Any) -> dict[str, Any] | None:
    tokens = inst.result.run_result.tokens
    return dict(tokens) if tokens else None


def _cell(values: list[float]) -> str:
    return number(fmean(values)) if values else "-"


def token_rows(series: SeriesData) -> list[list[str]]:
    """Rows for HEADERS; empty for a series without token metrics (any but an inference
    series: only its instances hold the inference harness's records)."""
    if series.kind != "inference":
        return []
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    sources: dict[str, set[str]] = defaultdict(set)
    system: list[float] = []
    for run_id in series.valid_run_ids:
        total = 0.0
        for inst in series.instances.get(run_id, []):
            tokens = _tokens(inst)
            if not tokens:
                continue
            name = inst.result.name
            if isinstance(rate := tokens.get("output_token_throughput"), int | float):
                per[name]["rate"].append(float(rate))
                total += float(rate)
            for kind, pct in _COLUMNS:
                value = (tokens.get(kind) or {}).get(pct)
                if isinstance(value, int | float):
                    per[name][f"{kind}.{pct}"].append(float(value))
            sources[name].add("LoadGen" if tokens.get("source") == "loadgen" else "SUT clock")
        if total:
            system.append(total)
    rows = [[name, _cell(values["rate"]),
             *(_cell(values[f"{kind}.{pct}"]) for kind, pct in _COLUMNS),
             ", ".join(sorted(sources[name]))] for name, values in per.items()]
    if rows and system:
        rows.append(["system", _cell(system), "", "", "", "", "sum per repeat"])
    return rows
