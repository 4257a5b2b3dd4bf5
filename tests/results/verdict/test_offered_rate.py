"""A Server series at a fixed rate: its samples/s is the rate LoadGen offered, so no
throughput is judged; whether the slice held the rate (LoadGen's VALID) is, repeat by
repeat against the reference's."""

from __future__ import annotations

from collections.abc import Sequence

from tests.results.series import QUIET, Repeat, record_series
from vgpu.results.store.records import InstanceResult
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SYSTEM_THROUGHPUT, WORST_P99, load_series
from vgpu.results.verdict.judge import compare_series
from vgpu.results.verdict.offered_rate import OFFERED_RATE_CHECK


def _series(store: ResultStore, valid: Sequence[bool], *, target_kind: str = "vm",
            samples_s: float = 100.0, p99_ms: float = 4.0, target_qps: float = 100.0) -> str:
    """Three instances at a target of ``target_qps`` each; ``valid`` per repeat."""
    runs = [Repeat([InstanceResult(
        name=name, status="ok", device_kind="cpu", validity="VALID" if ok else "INVALID",
        validity_reasons=[] if ok else ["99th percentile latency above the bound"],
        throughput=samples_s, latency_ns={"p99": p99_ms * 1e6, "p50": p99_ms * 0.5e6},
        timed_start_unix=1000.0, timed_end_unix=1010.0, result={"status": "ok"})
        for name in ("4g", "2g", "1g")], sync_skew_s=0.002) for ok in valid]
    return record_series(
        store, runs, scenario_id="6" if target_kind == "vm" else "bm6", scenario_name="s6",
        workload="resnet50/tiny onnxruntime Server", target_kind=target_kind,
        workload_detail={"loadgen_scenario": "Server", "target_qps": target_qps,
                         "repeats": len(valid)}).series_id


def _judge(store: ResultStore, vm: str, bare: str) -> dict[str, tuple[str, str]]:
    comparison = compare_series("vm-vs-bare-metal", load_series(store, vm),
                                load_series(store, bare), tolerance=0.02,
                                tolerances={WORST_P99: 0.05}, levels=QUIET)
    return {c.metric: (c.verdict, c.reason) for c in comparison.checks} | {
        "overall": (comparison.verdict, "")}


def test_no_throughput_is_judged_at_an_offered_rate(store: ResultStore) -> None:
    """10% fewer samples/s (as a short run's tail can log) is not judged; the slice held
    the rate in every repeat and its p99 did not move: PASS."""
    bare = _series(store, [True] * 3, target_kind="bare-metal")
    vm = _series(store, [True] * 3, samples_s=90.0)
    checks = _judge(store, vm, bare)
    assert SYSTEM_THROUGHPUT not in checks
    assert not any(name.startswith("throughput ") for name in checks)
    assert checks[OFFERED_RATE_CHECK][0] == "PASS"
    assert "VALID in 3 of 3 repeats at 100 queries/s per instance" in \
        checks[OFFERED_RATE_CHECK][1]
    assert checks["overall"][0] == "PASS"


def test_a_slice_that_never_holds_the_rate_bare_metal_held_fails(store: ResultStore) -> None:
    """Four INVALID repeats against four VALID: Fisher's one-sided p = 1/70 = 1.4%."""
    bare = _series(store, [True] * 4, target_kind="bare-metal")
    checks = _judge(store, _series(store, [False] * 4), bare)
    verdict, reason = checks[OFFERED_RATE_CHECK]
    assert verdict == "FAIL" and checks["overall"][0] == "FAIL"
    assert "VALID in 0 of 4 repeats" in reason and "the reference in 4 of 4" in reason
    assert "p = 0.014" in reason and "99th percentile latency above the bound" in reason
    # three against three could be chance (p = 1/20 = 5%, above 2.5%): not a FAIL
    three = _judge(store, _series(store, [False] * 3),
                   _series(store, [True] * 3, target_kind="bare-metal"))
    assert three[OFFERED_RATE_CHECK][0] == "INCONCLUSIVE"
    assert "4 a side, or 3 against 5" in three[OFFERED_RATE_CHECK][1]


def test_sides_offered_different_loads_decide_nothing(store: ResultStore) -> None:
    bare = _series(store, [True] * 4, target_kind="bare-metal", target_qps=50.0)
    checks = _judge(store, _series(store, [False] * 4), bare)
    verdict, reason = checks[OFFERED_RATE_CHECK]
    assert verdict == "INCONCLUSIVE"
    assert "target_qps 100.0 against the reference's 50.0" in reason


def test_one_missed_repeat_or_a_reference_that_missed_too_decides_nothing(
        store: ResultStore) -> None:
    bare = _series(store, [True] * 3, target_kind="bare-metal")
    once = _judge(store, _series(store, [True, False, True]), bare)
    assert once[OFFERED_RATE_CHECK][0] == "INCONCLUSIVE"
    assert "more repeats" in once[OFFERED_RATE_CHECK][1]
    assert once["overall"][0] == "INCONCLUSIVE"
    shaky = _series(store, [True, False, True], target_kind="bare-metal")
    both = _judge(store, _series(store, [False] * 3), shaky)
    assert both[OFFERED_RATE_CHECK][0] == "INCONCLUSIVE"
    assert "lower target_qps" in both[OFFERED_RATE_CHECK][1]
    few = _judge(store, _series(store, [False] * 2),
                 _series(store, [True] * 2, target_kind="bare-metal"))
    assert few[OFFERED_RATE_CHECK][0] == "INCONCLUSIVE"  # two repeats a side: not a FAIL
