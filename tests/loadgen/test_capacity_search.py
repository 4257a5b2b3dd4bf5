"""The capacity search's bracketing, bisection, budget and rerun of the final point, with
a run whose validity is a threshold (and, for the rerun, a flaky one); and the seeded
arrivals and prompts a search sends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.llm.capacity import Measure, find_capacity
from loadgen.llm.runs import (
    Budget,
    LoadShape,
    RunResult,
    Slo,
    make_prompt,
    summarise,
    unit_arrivals,
)


def threshold(capacity: float, flaky_at: frozenset[int] = frozenset()) -> Measure:
    def measure(rate: float, run: int) -> RunResult:
        return summarise(rate, [], Slo(1.0, 1.0), 0) if rate > capacity or run in flaky_at \
            else RunResult(rate, 100, True, [], 0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, rate, 1600)
    return measure


def test_the_search_brackets_bisects_and_confirms_within_its_budget() -> None:
    result = find_capacity(threshold(37.0), 10.0, Budget(runs=10, resolution=0.02))
    assert [r.rate for r in result.runs][:3] == [10.0, 20.0, 40.0]
    assert len(result.runs) == 10
    assert 37.0 * 0.97 < result.capacity <= 37.0 and result.confirmed
    assert result.confirmed_capacity == result.capacity
    assert result.runs[-1].rate == result.capacity  # the final point, rerun


def test_a_failed_rerun_leaves_the_capacity_unconfirmed() -> None:
    result = find_capacity(threshold(37.0, flaky_at=frozenset({7})), 10.0, Budget(runs=8))
    assert not result.confirmed and result.runs[-1].rate == result.capacity
    assert result.confirmed_capacity < result.capacity
    with pytest.raises(ValueError, match="at least 3 runs"):
        find_capacity(threshold(37.0), 10.0, Budget(runs=2))


def test_arrivals_scale_with_the_rate_and_prompts_never_share_a_prefix() -> None:
    base = unit_arrivals(0, 0, 1000)
    assert base.mean() / (1000 / 2) == pytest.approx(1.0, rel=0.1)  # rate 1: a gap of ~1 s
    assert list(unit_arrivals(0, 1, 5)) != list(base[:5])  # each repeat its own pattern
    shape = LoadShape(input_min=4, input_max=9)
    prompts = [make_prompt(0, 0, run, i, shape) for run in range(2) for i in range(300)]
    assert len({tuple(p[:3]) for p in prompts}) == len(prompts)
    assert all(4 <= len(p) <= 9 for p in prompts)
    assert [len(p) for p in prompts[:300]] == [len(p) for p in prompts[300:]]


@pytest.mark.slow  # about 5 s or more: the whole suite runs it, the quick tier not
def test_the_command_searches_runs_matched_and_refuses_a_bad_reference(
        tmp_path: Path) -> None:
    from loadgen.llm.capacity import main
    from loadgen.llm.slice_engine import SliceProfile
    from loadgen.llm.slice_sim import SliceSimulator

    common = ["--ttft-ms", "100", "--tpot-ms", "6", "--repeats", "1", "--runs", "3",
              "--min-queries", "20", "--duration-s", "0.3"]
    with SliceSimulator(SliceProfile(step_ms=2.0, context_us=8.0)) as sim:
        url = ["--url", sim.url]
        assert main([*url, *common, "--start-qps", "40", "--out", str(tmp_path / "b.json")]) == 0
        search = json.loads((tmp_path / "b.json").read_text())
        assert search["repeats"][0]["capacity_qps"] > 0
        assert len(search["repeats"][0]["runs"]) == 3
        assert main([*url, *common, "--matched-to", str(tmp_path / "b.json"),
                     "--out", str(tmp_path / "m.json")]) == 0
        matched = json.loads((tmp_path / "m.json").read_text())["repeats"][0]
        assert matched["rate"] == search["repeats"][0]["capacity_qps"]
        assert matched["matched"]["queries"] >= 20
        assert main([*url, *common, "--matched-to", str(tmp_path / "none.json"),
                     "--out", str(tmp_path / "x.json")]) == 2
    assert not (tmp_path / "x.json").exists()


def test_the_harness_lengthens_runs_shorter_than_ten_ttft_targets() -> None:
    from loadgen.contract import CapacitySpec
    from loadgen.llm.capacity_run import search_budget

    assert search_budget(CapacitySpec(duration_s=2.0), 2000.0).duration_s == 20.0
    assert search_budget(CapacitySpec(duration_s=2.0), 200.0).duration_s == 2.0
    assert search_budget(CapacitySpec(duration_s=30.0), 2000.0).duration_s == 30.0
