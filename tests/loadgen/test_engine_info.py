"""What a serving endpoint says about its caches: vLLM's Prometheus names read from a
scrape before and after a search."""

from __future__ import annotations

from loadgen.llm.engine_info import cache_summary, parse_prometheus
from loadgen.llm.server_metrics import KvAccount

VLLM = """# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 300.0
vllm:num_requests_running{engine="0",model_name="m"} 3.0
"""


def test_vllm_metrics_give_the_hit_rate_over_the_interval_and_the_kv_usage() -> None:
    before = parse_prometheus(VLLM)
    after = parse_prometheus(VLLM.replace("1000.0", "3000.0").replace("300.0", "1300.0")
                             .replace("} 0.25", "} 0.5"))
    summary = cache_summary(before, after)
    assert summary["prefix_cache_hit_rate"] == 0.5  # 1000 hits of 2000 queries between
    assert summary["kv_cache_usage"] == 0.5
    assert summary["kv_cache_peak_usage"] is None  # vLLM keeps no peak


def test_an_endpoint_without_metrics_is_recorded_as_such() -> None:
    assert cache_summary(None, None) == {
        "metrics_exposed": False, "prefix_cache_hit_rate": None, "kv_cache_usage": None,
        "kv_cache_peak_usage": None, "kv_blocks_used": None, "kv_blocks_peak": None,
        "kv_blocks_total": None}


def test_vgpus_servers_count_kv_blocks_and_their_peak() -> None:
    kv = KvAccount(pool_tokens=160)  # 10 blocks
    kv.admit(20)  # 2 blocks
    kv.grow(13)  # 33 tokens: 3 blocks
    kv.release(33)
    summary = cache_summary(None, parse_prometheus(kv.exposition()))
    assert summary["kv_blocks_used"] == 0 and summary["kv_blocks_total"] == 10
    assert summary["kv_blocks_peak"] == 3
    assert summary["kv_cache_usage"] == 0.0
    assert summary["kv_cache_peak_usage"] == 0.3
    assert summary["prefix_cache_hit_rate"] == 0.0
