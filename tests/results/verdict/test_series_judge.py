from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.results.series import QUIET
from vgpu.errors import InputError
from vgpu.results.store.disturbance import (
    CPU_STEAL,
    GPU_OTHERS,
    IGNORE_ENV,
    LIMITS,
    OTHER_CPU,
    disturbance,
)
from vgpu.results.store.records import Metric, RunStart
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SYSTEM_THROUGHPUT, WORST_P99, load_series, series_of_run
from vgpu.results.verdict.compare import Reference
from vgpu.results.verdict.judge import compare_series, compare_with_references
from vgpu.results.verdict.referee import default_kind

AddSeries = Callable[..., list[int]]

SIX = [{"4g": 500.0, "2g": 300.0, "1g": 200.0},
       {"4g": 501.0, "2g": 301.0, "1g": 199.0},
       {"4g": 499.0, "2g": 299.0, "1g": 201.0}]


def test_series_samples_sum_instances_per_repeat(
    store: ResultStore, add_series: AddSeries
) -> None:
    ids = add_series(SIX, loadgen_scenario="Server", p99_ms=4.0)
    data = load_series(store, series_of_run(store, ids[0]))
    assert data.run_ids == ids
    assert data.per_instance_throughput["2g"] == [300.0, 301.0, 299.0]
    assert data.samples[SYSTEM_THROUGHPUT].values == [1000.0, 1001.0, 999.0]
    assert data.samples[WORST_P99].values == pytest.approx([4.0, 4.0, 4.0])
    assert data.latency_matters
    assert data.latency_percentiles_ms()["4g"]["p50"] == pytest.approx(2.0)


def test_failed_repeats_are_left_out(store: ResultStore, add_series: AddSeries) -> None:
    ids = add_series(SIX[:2])
    run = store.run(ids[0])
    assert run is not None
    store.record_run(
        RunStart(series_id=run.series_id, scenario_id="6", scenario_name="s6",
                 workload=run.workload, target_kind="vm", repeat_index=2),
        "failed", reason="instance 1g died",
    )
    data = load_series(store, run.series_id)
    assert data.samples[SYSTEM_THROUGHPUT].values == [1000.0, 1001.0]


def test_vm_vs_bare_metal_from_the_store(store: ResultStore, add_series: AddSeries) -> None:
    vm = load_series(store, series_of_run(store, add_series(SIX)[0]))
    near = [{k: v * 1.004 for k, v in r.items()} for r in SIX]
    far = [{k: v * 1.10 for k, v in r.items()} for r in SIX]
    bm_near = load_series(store, series_of_run(
        store, add_series(near, target_kind="bare-metal", scenario_id="bm6")[0]))
    bm_far = load_series(store, series_of_run(store, add_series(far, target_kind="bare-metal")[0]))
    assert default_kind(vm, bm_near) == "vm-vs-bare-metal"
    passed = compare_series("vm-vs-bare-metal", vm, bm_near, tolerance=0.02, levels=QUIET)
    failed = compare_series("vm-vs-bare-metal", vm, bm_far, tolerance=0.02, levels=QUIET)
    assert [c.metric for c in passed.checks] == [SYSTEM_THROUGHPUT]  # Offline: no latency
    assert passed.verdict == "PASS"
    assert failed.verdict == "FAIL"
    assert failed.checks[0].difference_pct == pytest.approx((1 / 1.10 - 1) * 100)


def test_scenario_vs_scenario_gain(store: ResultStore, add_series: AddSeries) -> None:
    six = load_series(store, series_of_run(store, add_series(SIX)[0]))
    one = load_series(store, series_of_run(store, add_series(
        [{"7g": 945.0}, {"7g": 946.0}, {"7g": 944.0}], scenario_id="1")[0]))
    assert default_kind(six, one) == "scenario-vs-scenario"
    comparison = compare_series("scenario-vs-scenario", six, one, tolerance=0.02,
                                min_gain=0.05, levels=QUIET)
    assert comparison.checks[0].difference_pct == pytest.approx((1000 / 945 - 1) * 100)
    assert comparison.verdict == "PASS"


def test_baseline_latency_and_training_metrics(store: ResultStore, add_series: AddSeries) -> None:
    base = load_series(store, series_of_run(store, add_series(
        SIX, loadgen_scenario="Server", p99_ms=4.0,
        metrics=[[Metric("step_time", 0.10, "s")]] * 3)[0]))
    slower = load_series(store, series_of_run(store, add_series(
        SIX, loadgen_scenario="Server", p99_ms=4.4,
        metrics=[[Metric("step_time", 0.10, "s")]] * 3)[0]))
    comparison = compare_series("run-vs-baseline", slower, base, tolerance=0.02,
                                tolerances={WORST_P99: 0.05}, levels=QUIET)
    verdicts = {c.metric: c.verdict for c in comparison.checks}
    # Server: the samples/s are the offered rate, not judged (test_offered_rate.py)
    assert verdicts == {WORST_P99: "FAIL", "step_time": "PASS",
                        "valid_at_offered_rate": "PASS"}
    assert comparison.verdict == "FAIL"
    assert not slower.samples["step_time"].higher_is_better


def test_one_slower_instance_fails_against_its_baseline_while_the_total_holds(
        store: ResultStore, add_series: AddSeries) -> None:
    base = load_series(store, series_of_run(store, add_series(
        [{"a": 500.0, "b": 500.0}, {"a": 502.0, "b": 498.0}, {"a": 499.0, "b": 501.0}])[0]))
    shifted = load_series(store, series_of_run(store, add_series(
        [{"a": 900.0, "b": 100.0}, {"a": 902.0, "b": 99.0}, {"a": 899.0, "b": 101.0}])[0]))
    comparison = compare_series("run-vs-baseline", shifted, base, tolerance=0.02, levels=QUIET)
    verdicts = {c.metric: c.verdict for c in comparison.checks}
    assert verdicts[SYSTEM_THROUGHPUT] == "PASS"
    assert verdicts["throughput a"] == "PASS" and verdicts["throughput b"] == "FAIL"
    assert comparison.verdict == "FAIL"
    vm_vs_bm = compare_series("vm-vs-bare-metal", shifted, base, tolerance=0.02, levels=QUIET)
    assert [c.metric for c in vm_vs_bm.checks] == [SYSTEM_THROUGHPUT]  # names differ there


def test_reference_data_comparison(store: ResultStore, add_series: AddSeries) -> None:
    data = load_series(store, series_of_run(store, add_series(SIX)[0]))
    ok = compare_with_references(
        data, {SYSTEM_THROUGHPUT: Reference(1005.0, lower=-0.02, unit="samples/s")}, "lab",
        QUIET)
    bad = compare_with_references(
        data, {SYSTEM_THROUGHPUT: Reference(1200.0, lower=-0.02, unit="samples/s")}, "lab")
    assert (ok.verdict, bad.verdict) == ("PASS", "FAIL")
    with pytest.raises(KeyError, match="no metric nonsense"):
        compare_with_references(data, {"nonsense": Reference(1.0)}, "lab")


def test_unknown_or_failed_series_is_an_input_error(store: ResultStore) -> None:
    with pytest.raises(InputError, match="no run 42"):
        series_of_run(store, 42)
    with pytest.raises(InputError, match="no run that finished ok"):
        load_series(store, "nope")


@pytest.mark.usefixtures("judged_disturbance")
def test_a_disturbed_run_is_shown_but_makes_no_verdict(
        store: ResultStore, add_series: AddSeries) -> None:
    """Run 2 of the candidate ran while other processes used 63% of the CPU (and ran 40%
    slower): it stays in the series' numbers, marked, and the comparison, which its
    checks would call FAIL, is INCONCLUSIVE and names the run and the load; the
    disturbance metrics themselves are not judged."""
    quiet = [Metric(OTHER_CPU, 3.0, "%"), Metric(CPU_STEAL, 0.0, "%")]
    busy = [Metric(OTHER_CPU, 63.0, "%"), Metric(CPU_STEAL, 0.0, "%")]
    slowed = [SIX[0], {k: v * 0.6 for k, v in SIX[1].items()}, SIX[2]]
    run_ids = add_series(slowed, metrics=[quiet, busy, quiet])
    candidate = load_series(store, series_of_run(store, run_ids[0]))
    reference = load_series(store, series_of_run(store, add_series(
        SIX, target_kind="bare-metal", scenario_id="bm6")[0]))
    assert candidate.valid_run_ids == run_ids
    assert [d.run_id for d in candidate.disturbed_runs] == [run_ids[1]]
    assert OTHER_CPU not in candidate.samples and candidate.run_quality[OTHER_CPU] == \
        [3.0, 63.0, 3.0]
    comparison = compare_series("vm-vs-bare-metal", candidate, reference, tolerance=0.02,
                                levels=QUIET)
    assert comparison.checks[0].verdict != "PASS"
    assert comparison.verdict == "INCONCLUSIVE"
    expected = f"disturbed: other processes used 63% of the CPU during run {run_ids[1]}"
    assert expected in comparison.why[0]
    assert comparison.as_dict()["disturbed"] == comparison.disturbed
    clean = compare_series("vm-vs-bare-metal", reference, reference, tolerance=0.02,
                           levels=QUIET)
    assert clean.disturbed == [] and clean.verdict == "PASS"


@pytest.mark.usefixtures("judged_disturbance")
def test_limits_are_stated_and_only_run_level_metrics_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert disturbance(7, [Metric(OTHER_CPU, LIMITS[OTHER_CPU], "%")]) is None
    assert disturbance(7, [Metric(OTHER_CPU, 90.0, "%", instance="a")]) is None
    found = disturbance(7, [Metric(CPU_STEAL, 12.0, "%"), Metric(GPU_OTHERS, 1.0, "")])
    assert found is not None and found.describe() == (
        "disturbed: the hypervisor stole 12% of the CPU; 1 other process(es) ran on the GPU "
        "during run 7")
    monkeypatch.setenv(IGNORE_ENV, "1")  # a machine shared on purpose
    assert disturbance(7, [Metric(OTHER_CPU, 90.0, "%")]) is None
