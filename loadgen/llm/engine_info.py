"""What a serving endpoint says about itself, recorded beside a capacity search: its
version (vLLM's ``GET /version``), its model card (``GET /v1/models``) and its Prometheus
``GET /metrics`` before and after the search, from which the prefix-cache hit rate over the
search and the KV-cache usage come when the engine exposes them (vLLM's names; vgpu's
loopback server and the slice simulator expose the same). An endpoint that exposes none of
this is recorded as such; nothing here can fail a run."""

from __future__ import annotations

import http.client
import json
import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

TIMEOUT_S = 5.0
PREFIX_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
PREFIX_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
KV_PEAK = "vgpu:kv_cache_peak_usage_perc"  # vgpu's servers: the highest since they started
KV_BLOCKS_USED = "vgpu:kv_blocks_used"
KV_BLOCKS_TOTAL = "vgpu:kv_blocks_total"
KV_BLOCKS_PEAK = "vgpu:kv_blocks_peak"


def _get(url: str, path: str) -> tuple[int, str] | None:
    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname or "localhost", parts.port, timeout=TIMEOUT_S)
    try:
        connection.request("GET", parts.path.rstrip("/") + path)
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def parse_prometheus(text: str) -> dict[str, float]:
    """Each sample of a Prometheus text exposition, label sets summed per metric name."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, value = line.rpartition(" ")
        name = name_part.split("{", 1)[0].strip()
        try:
            number = float(value)
        except ValueError:
            continue
        if name and math.isfinite(number):
            found[name] = found.get(name, 0.0) + number
    return found


def scrape_metrics(url: str) -> dict[str, float] | None:
    """The endpoint's /metrics, or None where it has none."""
    answer = _get(url, "/metrics")
    if answer is None or answer[0] != 200:
        return None
    return parse_prometheus(answer[1])


def _json(url: str, path: str) -> Any:
    answer = _get(url, path)
    if answer is None or answer[0] != 200:
        return None
    try:
        return json.loads(answer[1])
    except ValueError:
        return None


def _first(metrics: Mapping[str, float], names: tuple[str, ...]) -> float | None:
    return next((metrics[n] for n in names if n in metrics), None)


def describe_engine(url: str) -> dict[str, Any]:
    """Version and model card, as the endpoint states them (None: not exposed)."""
    return {"url": url, "version": _json(url, "/version"), "models": _json(url, "/v1/models")}


def cache_summary(before: Mapping[str, float] | None,
                  after: Mapping[str, float] | None) -> dict[str, Any]:
    """Prefix-cache hit rate over the interval and KV-cache usage at its end (and its peak
    where the engine keeps one), from two scrapes; None where not exposed."""
    out: dict[str, Any] = {"metrics_exposed": after is not None, "prefix_cache_hit_rate": None,
                           "kv_cache_usage": None, "kv_cache_peak_usage": None,
                           "kv_blocks_used": None, "kv_blocks_peak": None,
                           "kv_blocks_total": None}
    if after is None:
        return out
    hits, queries = _first(after, PREFIX_HITS), _first(after, PREFIX_QUERIES)
    if hits is not None and queries is not None:
        hits -= _first(before or {}, PREFIX_HITS) or 0.0
        queries -= _first(before or {}, PREFIX_QUERIES) or 0.0
        out["prefix_cache_hit_rate"] = hits / queries if queries > 0 else 0.0
    out["kv_cache_usage"] = _first(after, KV_USAGE)
    out["kv_cache_peak_usage"] = after.get(KV_PEAK)
    out["kv_blocks_used"] = after.get(KV_BLOCKS_USED)
    out["kv_blocks_peak"] = after.get(KV_BLOCKS_PEAK)
    out["kv_blocks_total"] = after.get(KV_BLOCKS_TOTAL)
    return out
