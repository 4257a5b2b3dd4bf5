"""LLM series: token metrics from harness records, stored per instance and run, and judged
(tokens/s, TTFT p99, TPOT p99) with their own bands, also between two scenarios."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadgen.contract import RunResult, parse_run_result
from tests.results.series import QUIET
from vgpu.results.store.records import Metric
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import load_series, series_of_run
from vgpu.results.store.tokens import ITL_P99, OUTPUT_TOKEN_THROUGHPUT, TTFT_P99, token_metrics
from vgpu.results.verdict.judge import compare_series

AddSeries = Callable[..., list[int]]
RATES = [{"a": 100.0, "b": 100.0}] * 3


def _tokens(rate: float, ttft_p99: float, itl_p99: float) -> dict[str, Any]:
    return {"tokens": {"output_token_throughput": rate,
                       "time_to_first_token_ms": {"p50": ttft_p99 / 4, "p99": ttft_p99},
                       "inter_token_latency_ms": {"p50": itl_p99 / 2, "p99": itl_p99}},
            "scenario": "Server"}


def _parsed(records: dict[str, dict[str, Any]]) -> dict[str, RunResult]:
    return {name: parse_run_result(record) for name, record in records.items()}


def test_token_metrics_per_instance_and_for_the_run() -> None:
    metrics = token_metrics(_parsed({"a": _tokens(1000.0, 20.0, 1.0),
                                     "b": _tokens(900.0, 30.0, 0.5), "c": {}}))
    by = {(m.name, m.instance): m.value for m in metrics}
    assert by[(OUTPUT_TOKEN_THROUGHPUT, "a")] == 1000.0
    assert by[("time_to_first_token_p50", "b")] == 7.5
    assert by[(TTFT_P99, None)] == 30.0  # the worst instance
    assert by[(ITL_P99, None)] == 1.0
    assert (OUTPUT_TOKEN_THROUGHPUT, None) not in by  # instance c has no tokens: no sum
    assert ("time_to_first_token_p50", None) not in by  # p50s are per instance only
    offline_pair = {name: {**_tokens(rate, 20.0, 1.0), "scenario": "Offline"}
                    for name, rate in (("a", 1000.0), ("b", 900.0))}
    both = {(m.name, m.instance): m.value for m in token_metrics(_parsed(offline_pair))}
    assert both[(OUTPUT_TOKEN_THROUGHPUT, None)] == 1900
    # at a fixed offered rate the system's tokens/s is the rate asked for: not judged
    server = token_metrics(_parsed({"a": _tokens(1000.0, 20.0, 1.0),
                                    "b": _tokens(900.0, 30.0, 0.5)}))
    assert (OUTPUT_TOKEN_THROUGHPUT, None) not in {(m.name, m.instance) for m in server}
    offline = token_metrics(_parsed({"a": {**_tokens(1000.0, 20.0, 1.0),
                                           "scenario": "Offline"}}))
    assert not any(m.name.startswith("time_to_first_token") for m in offline)


def _run_metrics(ttft: float, itl: float, rate: float = 2000.0) -> list[list[Metric]]:
    return [[Metric(OUTPUT_TOKEN_THROUGHPUT, rate * (1 + d), "tokens/s"),
             Metric(TTFT_P99, ttft * (1 + d), "ms"), Metric(ITL_P99, itl * (1 + d), "ms")]
            for d in (0.0, 0.001, -0.001)]


def test_scenario_vs_scenario_judges_the_tokens(store: ResultStore,
                                                add_series: AddSeries) -> None:
    def series(scenario_id: str, ttft: float) -> Any:
        ids = add_series(RATES, scenario_id=scenario_id, loadgen_scenario="Server",
                         workload="llm-server", metrics=_run_metrics(ttft, 1.0))
        return load_series(store, series_of_run(store, ids[0]))

    base, same, slow = series("bm6", 20.0), series("6", 20.1), series("6", 40.0)
    bands = {TTFT_P99: 0.10, ITL_P99: 0.05}
    passed = compare_series("scenario-vs-scenario", same, base, tolerance=0.02,
                            tolerances=bands, levels=QUIET)
    # at the offered rate neither samples/s nor tokens/s is a finding; holding it is
    assert [c.metric for c in passed.checks] == [TTFT_P99, ITL_P99, "valid_at_offered_rate"]
    assert passed.verdict == "PASS"
    failed = compare_series("scenario-vs-scenario", slow, base, tolerance=0.02,
                            tolerances=bands, levels=QUIET)
    verdicts = {c.metric: c.verdict for c in failed.checks}
    assert verdicts[TTFT_P99] == "FAIL"  # same samples/s, doubled time to first token
    assert "system_throughput" not in verdicts
    assert failed.verdict == "FAIL"


def test_the_scenarios_token_bands() -> None:
    from vgpu.model.scenario import Tolerances
    from vgpu.results.store.series import WORST_P99
    from vgpu.results.verdict.referee import metric_tolerances

    bands = metric_tolerances(Tolerances(latency_pct=5, ttft_pct=12, tpot_pct=7))
    assert bands == {WORST_P99: 0.05, TTFT_P99: 0.12, ITL_P99: 0.07}
