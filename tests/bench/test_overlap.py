"""The timed overlap of a round and each instance's throughput in the shared window."""

from __future__ import annotations

import pytest

from loadgen.contract import RunResult, parse_run_result
from vgpu.bench.overlap import COMMON_WINDOW_THROUGHPUT, overlap_metrics, round_overlap
from vgpu.results.store.records import Metric
from vgpu.results.store.series import TIMED_OVERLAP


def _record(start: float, end: float, rate: float) -> RunResult:
    return parse_run_result({"timed_start_unix": start, "timed_end_unix": end,
            "sut": {"completions": {"unix": [start, end],
                                    "samples": [0.0, rate * (end - start)]}}})


def test_the_shared_window_and_the_rates_inside_it() -> None:
    overlap = round_overlap({"a": _record(100.0, 110.0, 50.0),
                             "b": _record(101.0, 112.0, 20.0)})
    assert overlap is not None
    assert overlap.fraction == pytest.approx(9 / 12)  # 101..110 of 100..112
    assert overlap.common_s == pytest.approx(9.0)
    assert overlap.throughput == pytest.approx({"a": 50.0, "b": 20.0})
    assert overlap_metrics(overlap) == [
        Metric(TIMED_OVERLAP, pytest.approx(0.75), "fraction"),  # type: ignore[arg-type]
        Metric(COMMON_WINDOW_THROUGHPUT, pytest.approx(50.0), "samples/s", "a"),  # type: ignore[arg-type]
        Metric(COMMON_WINDOW_THROUGHPUT, pytest.approx(20.0), "samples/s", "b"),  # type: ignore[arg-type]
    ]


def test_runs_that_never_shared_a_moment_overlap_zero() -> None:
    overlap = round_overlap({"a": _record(0.0, 1.0, 5.0), "b": _record(2.0, 3.0, 5.0)})
    assert overlap is not None and overlap.fraction == 0.0 and overlap.throughput == {}


def test_an_instance_without_a_timed_span_gives_no_overlap() -> None:
    unstarted = parse_run_result({"timed_start_unix": None})
    assert round_overlap({"a": _record(0.0, 1.0, 5.0), "b": unstarted}) is None
    assert overlap_metrics(None) == []
