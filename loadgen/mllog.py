"""Reads LoadGen's detail log (``:::MLLOG {json}`` lines) into the result record's fields.
The summary text file is for people; every number here comes from the detail log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PREFIX = ":::MLLOG "
PERCENTILES = ("50.00", "90.00", "95.00", "97.00", "99.00", "99.90")
FLAG_KEYS = ("result_min_duration_met", "result_min_queries_met",
             "result_perf_constraints_met", "early_stopping_met")


def read_entries(path: Path) -> list[dict[str, Any]]:
    entries = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(PREFIX):
            try:
                entries.append(json.loads(line[len(PREFIX):]))
            except json.JSONDecodeError:
                continue
    return entries


def _latencies(values: dict[str, Any], infix: str) -> dict[str, Any] | None:
    keys = {
        "min": f"result_min_{infix}latency_ns",
        "max": f"result_max_{infix}latency_ns",
        "mean": f"result_mean_{infix}latency_ns",
    }
    out = {name: values.get(key) for name, key in keys.items()}
    per = "per_query_" if infix else ""
    for pct in PERCENTILES:
        label = f"p{pct.rstrip('0').rstrip('.')}"
        out[label] = values.get(f"result_{pct}_percentile_{per}latency_ns")
    return out if any(v is not None for v in out.values()) else None


def _throughput(values: dict[str, Any], scenario: str | None) -> dict[str, Any]:
    """Samples per second, from the key LoadGen reports for the scenario."""
    if scenario == "Offline":
        key = "result_samples_per_second"
        return {"samples_per_second": values.get(key), "source": key}
    if scenario == "Server":
        key = "result_completed_samples_per_sec"
        return {"samples_per_second": values.get(key), "source": key,
                "scheduled_samples_per_second": values.get("result_scheduled_samples_per_sec")}
    if scenario == "SingleStream":
        key = "result_qps_with_loadgen_overhead"
        return {"samples_per_second": values.get(key), "source": key,
                "without_loadgen_overhead": values.get("result_qps_without_loadgen_overhead")}
    if scenario == "MultiStream":
        # LoadGen reports query latency here, not a rate; queries run back to back, so the
        # rate is samples per query over the mean query latency.
        mean = values.get("result_mean_query_latency_ns")
        per_query = values.get("effective_samples_per_query")
        rate = per_query * 1e9 / mean if mean and per_query else None
        return {"samples_per_second": rate,
                "source": "effective_samples_per_query * 1e9 / result_mean_query_latency_ns"}
    return {"samples_per_second": None, "source": None}


def _reasons(values: dict[str, Any], errors: list[str]) -> list[str]:
    reasons = []
    text = values.get("result_invalid_reason") or ""
    reasons += [part.strip() + "." for part in text.split(". ") if part.strip(" .")]
    for key in FLAG_KEYS:
        if values.get(key) is False:
            reasons.append(f"{key} is false")
    if values.get("early_stopping_met") is False and values.get("early_stopping_result"):
        reasons.append("early stopping: " + " ".join(values["early_stopping_result"].split()))
    reasons += [f"LoadGen error: {message}" for message in errors]
    return reasons


def summarize(detail_log: Path) -> dict[str, Any]:
    entries = read_entries(detail_log)
    values: dict[str, Any] = {}
    errors: list[str] = []
    warnings: list[str] = []
    for entry in entries:
        values[entry.get("key", "")] = entry.get("value")
        meta = entry.get("metadata", {})
        if meta.get("is_error"):
            errors.append(str(entry.get("value")))
        elif meta.get("is_warning"):
            warnings.append(str(entry.get("value")))
    scenario = values.get("effective_scenario")
    validity = values.get("result_validity")
    query_count = values.get("result_query_count")
    per_query = values.get("effective_samples_per_query")
    return {
        "loadgen_version": values.get("loadgen_version"),
        "scenario": scenario,
        "mode": values.get("effective_test_mode"),
        "settings": {k.removeprefix("effective_"): v for k, v in values.items()
                     if k.startswith("effective_")},
        "requested_settings": {k.removeprefix("requested_"): v for k, v in values.items()
                               if k.startswith("requested_")},
        "throughput": _throughput(values, scenario),
        "latency_ns": _latencies(values, ""),
        "query_latency_ns": _latencies(values, "query_") if scenario == "MultiStream" else None,
        "query_count": query_count,
        "samples_per_query": per_query,
        "sample_count": query_count * per_query if query_count and per_query else None,
        "overlatency_query_count": values.get("result_overlatency_query_count"),
        "validity": None if validity is None else {
            "result": validity,
            "reasons": _reasons(values, errors) if validity != "VALID" else [],
            **{k.removeprefix("result_"): values.get(k) for k in FLAG_KEYS},
        },
        "early_stopping": {k.removeprefix("early_stopping_"): v for k, v in values.items()
                           if k.startswith("early_stopping_")} or None,
        "loadgen_errors": errors,
        "loadgen_warnings": warnings,
    }
