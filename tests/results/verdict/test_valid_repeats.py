"""Statistics come from repeats LoadGen found VALID; INVALID ones are listed with their
reasons, and a verdict with fewer VALID repeats than the series asks for cannot PASS."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest

from tests.results.series import QUIET, Repeat, record_series
from vgpu.results.store.records import InstanceResult, Metric, RunStart, TargetKind
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SYSTEM_THROUGHPUT, TIMED_OVERLAP, load_series
from vgpu.results.verdict.compare import Reference
from vgpu.results.verdict.judge import compare_series, compare_with_references

REASON = "Reduce target QPS to improve latency."


def _instance(name: str, throughput: float, validity: str) -> InstanceResult:
    return InstanceResult(
        name=name, status="ok", device_kind="cpu", validity=validity,
        validity_reasons=[REASON] if validity == "INVALID" else [],
        throughput=throughput, latency_ns={"p99": 4e6},
    )


def _series(store: ResultStore, repeats: Sequence[tuple[float, str]], *,
            target_kind: TargetKind,
            min_valid: int | None = None, overlap: float = 0.97) -> str:
    """One run per repeat: (instance a's samples/s, validity of instance b); b runs at
    half of a's rate."""
    detail = {"loadgen_scenario": "SingleStream", "repeats": len(repeats),
              "min_valid": min_valid}
    runs = [Repeat([_instance("a", rate, "VALID"), _instance("b", rate / 2, validity)],
                   metrics=[Metric(TIMED_OVERLAP, overlap, "fraction")])
            for rate, validity in repeats]
    return record_series(store, runs, workload="w", target_kind=target_kind,
                         workload_detail=detail).series_id


MIXED = [(100.0, "VALID"), (101.0, "INVALID"), (99.0, "VALID"), (100.5, "VALID")]
STEADY = [(100.0, "VALID"), (100.4, "VALID"), (99.6, "VALID"), (100.2, "VALID")]


def test_invalid_repeats_are_listed_and_left_out_of_the_samples(store: ResultStore) -> None:
    data = load_series(store, _series(store, MIXED, target_kind="vm"))
    second = data.runs[1].id
    assert data.invalid_runs == [(second, "b", [REASON])]
    assert data.valid_run_ids == [r.id for r in data.runs if r.id != second]
    assert data.samples[SYSTEM_THROUGHPUT].values == [150.0, 148.5, 150.75]
    assert data.per_instance_throughput["b"] == [50.0, 49.5, 50.25]
    assert data.valid_shortfall == (
        f"scenario 6 w [vm]: 3 valid of 4 repeats, at least 4 needed (INVALID: run {second})")
    assert TIMED_OVERLAP not in data.samples  # how it was measured is not judged
    assert data.run_quality[TIMED_OVERLAP] == [0.97] * 4


def test_too_few_valid_repeats_make_a_pass_inconclusive(store: ResultStore) -> None:
    vm = load_series(store, _series(store, MIXED, target_kind="vm"))
    bare_metal = load_series(store, _series(store, STEADY, target_kind="bare-metal"))
    comparison = compare_series("vm-vs-bare-metal", vm, bare_metal, tolerance=0.05, levels=QUIET)
    assert [c.verdict for c in comparison.checks] == ["PASS", "PASS"]  # throughput, p99
    assert comparison.verdict == "INCONCLUSIVE"
    assert comparison.shortfalls == [vm.valid_shortfall]
    assert "3 valid of 4 repeats" in comparison.as_dict()["shortfalls"][0]  # type: ignore[index]


def test_min_valid_sets_the_floor(store: ResultStore) -> None:
    vm = load_series(store, _series(store, MIXED, target_kind="vm", min_valid=3))
    bare_metal = load_series(store, _series(store, MIXED, target_kind="bare-metal",
                                            min_valid=3))
    assert vm.valid_shortfall is None
    passed = compare_series("vm-vs-bare-metal", vm, bare_metal, tolerance=0.05, levels=QUIET)
    assert passed.verdict == "PASS"  # one INVALID run on each side: an even split
    references = {SYSTEM_THROUGHPUT: Reference(value=150.0, lower=-0.05, unit="samples/s")}
    assert compare_with_references(vm, references, "ref", QUIET).verdict == "PASS"


def test_a_fail_in_the_valid_repeats_stays_a_fail(store: ResultStore) -> None:
    vm = load_series(store, _series(store, MIXED, target_kind="vm"))
    faster = [(rate * 1.3, validity) for rate, validity in STEADY]
    bare_metal = load_series(store, _series(store, faster, target_kind="bare-metal"))
    comparison = compare_series("vm-vs-bare-metal", vm, bare_metal, tolerance=0.05, levels=QUIET)
    assert comparison.shortfalls and comparison.verdict == "FAIL"


def test_an_invalid_reference_makes_the_verdict_inconclusive(store: ResultStore) -> None:
    vm = load_series(store, _series(store, STEADY, target_kind="vm"))
    bare_metal = load_series(store, _series(store, MIXED, target_kind="bare-metal"))
    comparison = compare_series("vm-vs-bare-metal", vm, bare_metal, tolerance=0.05, levels=QUIET)
    assert comparison.verdict == "INCONCLUSIVE"
    assert comparison.shortfalls[0].startswith("scenario 6 w [bare-metal]: 3 valid of 4")


def test_the_cv_is_of_the_valid_repeats(store: ResultStore) -> None:
    data = load_series(store, _series(store, MIXED, target_kind="vm"))
    values = [150.0, 148.5, 150.75]
    mean = sum(values) / 3
    stdev = (sum((v - mean) ** 2 for v in values) / 2) ** 0.5
    assert data.throughput_cv == pytest.approx(stdev / mean)


def test_invalid_runs_split_unevenly_refuse_a_pass(store: ResultStore) -> None:
    """The floor allows one INVALID run, but only the VM lost one: the runs that leave
    are not a random share, so no PASS, and the verdict says so with the counts."""
    vm = load_series(store, _series(store, MIXED, target_kind="vm", min_valid=3))
    bare_metal = load_series(store, _series(store, STEADY, target_kind="bare-metal"))
    comparison = compare_series("vm-vs-bare-metal", vm, bare_metal, tolerance=0.05,
                                levels=QUIET)
    assert [c.verdict for c in comparison.checks] == ["PASS", "PASS"]
    assert comparison.verdict == "INCONCLUSIVE"
    [split] = comparison.shortfalls
    assert split.startswith("INVALID runs split unevenly between the sides (1 of 4 runs "
                            "of scenario 6 w [vm], 0 of 4 runs of scenario 6 w "
                            "[bare-metal])")
    failing = load_series(store, _series(store, [(r * 1.3, v) for r, v in STEADY],
                                         target_kind="bare-metal"))
    assert compare_series("vm-vs-bare-metal", vm, failing, tolerance=0.05,
                          levels=QUIET).verdict == "FAIL"  # a FAIL is not held back


def test_the_floor_is_the_final_total_not_the_pilots(store: ResultStore) -> None:
    """A sequential series stored its pilot's 4 runs with repeats 4 and grew to 8: its
    floor is 8 (all of them, no min_valid), not the pilot's 4."""
    series_id = uuid.uuid4().hex
    for index in range(8):
        total = 4 if index < 4 else 8
        start = RunStart(series_id=series_id, scenario_id="6", scenario_name="s6",
                         workload="w", target_kind="vm", repeat_index=index,
                         workload_detail={"loadgen_scenario": "Offline", "repeats": total,
                                          "min_valid": total})
        store.record_run(start, "ok", instances=[
            _instance("a", 100.0, "INVALID" if index in (5, 6) else "VALID")])
    data = load_series(store, series_id)
    assert (data.repeats_asked, data.min_valid, data.valid_count) == (8, 8, 6)
    assert data.valid_shortfall is not None and "6 valid of 8 repeats" in \
        data.valid_shortfall
