"""The capacity panel of an LLM series measured as capacity at the SLO: per instance, the
capacity each valid repeat's search found (and whether its rerun confirmed it), the rates
it tried, inter-token latency at the capacity, what the engine said of its caches and how
far the client fell behind its schedule (a lag of milliseconds is the client's, not the
slice's); shown by `vgpu bench` and the HTML report."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from statistics import fmean
from typing import Any

from vgpu.results.store.series import SeriesData
from vgpu.results.views.format import number

HEADERS = ["instance", "capacity q/s (mean)", "per repeat", "confirmed", "runs (VALID)",
           "ITL p99 ms at capacity", "longest stall ms", "KV peak / prefix hits",
           "client send lag p99 ms at capacity"]


def _at_capacity(search: Mapping[str, Any]) -> Mapping[str, Any]:
    at = [r for r in search.get("runs", []) if r.get("valid")
          and r.get("rate") == search.get("capacity_qps")]
    return at[-1] if at else {}


def _cache(search: Mapping[str, Any]) -> str:
    cache = (search.get("engine") or {}).get("cache") or {}
    if not cache.get("metrics_exposed"):
        return "no /metrics"
    peak, hits = cache.get("kv_cache_peak_usage"), cache.get("prefix_cache_hit_rate")
    blocks = cache.get("kv_blocks_peak")
    kv = f"{peak:.1%}" if isinstance(peak, float) else \
        ("-" if blocks is None else f"{blocks:g} blocks")
    return f"{kv} / {'-' if hits is None else f'{hits:.0%}'}"


def _lag_at_capacity(searches: list[Mapping[str, Any]]) -> str:
    """The client's worst send lag p99 at the searches' capacities: at the rate that
    decides the capacity, a lag of milliseconds is the client's, not the slice's."""
    lags = [lag for s in searches
            if isinstance(lag := (_at_capacity(s).get("client") or {}).get("send_lag_p99_ms"),
                          int | float)]
    return number(max(lags)) if lags else "-"


def capacity_rows(series: SeriesData) -> list[list[str]]:
    """Rows for HEADERS; empty for a series that measured no capacity."""
    per: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for run_id in series.valid_run_ids:
        for inst in series.instances.get(run_id, []):
            search = (inst.result.result or {}).get("capacity")
            if isinstance(search, dict):
                per[inst.result.name].append(search)
    rows = []
    for name, searches in per.items():
        capacities = [float(s["capacity_qps"]) for s in searches]
        runs = [r for s in searches for r in s.get("runs", [])]
        itl = [v for s in searches if (v := _at_capacity(s).get("itl_p99_ms")) is not None]
        stalls = [v for s in searches
                  if (v := _at_capacity(s).get("longest_stall_ms")) is not None]
        rows.append([name, number(fmean(capacities)),
                     ", ".join(number(c) for c in capacities),
                     f"{sum(1 for s in searches if s.get('confirmed'))}/{len(searches)}",
                     f"{len(runs)} ({sum(1 for r in runs if r.get('valid'))})",
                     number(fmean(itl)) if itl else "-",
                     number(max(stalls)) if stalls else "-", _cache(searches[-1]),
                     _lag_at_capacity(searches)])
    return rows
