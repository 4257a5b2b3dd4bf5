"""`vgpu bench --until-decided / --max-repeats / --budget`: the series loop's hook extends a
series from its stored repeats judged against the stored baseline (repeats faked: each
stores the next synthetic throughput)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.results.series import QUIET, Repeat, record_series
from vgpu import catalog
from vgpu.bench import pacing, session
from vgpu.bench.outcome import BenchOutcome
from vgpu.bench.session import run_bench
from vgpu.bench.workload import BenchOverrides, effective_workload
from vgpu.cli.checks import budget_s
from vgpu.errors import InputError
from vgpu.model.scenario import InferenceWorkload
from vgpu.results.stats.intervals import ALPHA
from vgpu.results.stats.noise import NoiseLevels, uncalibrated
from vgpu.results.stats.spending import look_level
from vgpu.results.store.records import InstanceResult
from vgpu.results.store.result_store import ResultStore
from vgpu.results.verdict import judge
from vgpu.targets.devices import cpu_device
from vgpu.targets.local import local_targets

WORKLOAD = "resnet50-offline"
REFERENCE = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0, 1008.0, 992.0, 1003.0, 997.0]


def _store_baseline(store: ResultStore, key: str) -> None:
    record_series(store, [Repeat([_instance(value)]) for value in REFERENCE],
                  scenario_id="bm6", scenario_name="bm6", workload=key,
                  target_kind="bare-metal",
                  workload_detail={"loadgen_scenario": "Offline", "repeats": len(REFERENCE)})


def _instance(throughput: float) -> InstanceResult:
    return InstanceResult(name="a", status="ok", device_kind="cpu", validity="VALID",
                          throughput=throughput, latency_ns={"p99": 1e6})


def _fake_repeats(values: Iterator[float]) -> Any:
    def run_repeat(store: ResultStore, scenario: Any, targets: Any, result: Any,
                   repeat: int, repeats: int, *_: Any) -> list[Any]:
        run_id = session._begin_run(store, scenario, targets, result, repeat, repeats)
        store.finish_run(run_id, "ok", instances=[_instance(next(values))])
        return []
    return run_repeat


def _bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, values: Iterable[float],
           overrides: BenchOverrides, baseline: bool = True,
           levels: NoiseLevels = QUIET) -> BenchOutcome:
    scenario = catalog.load("6")
    targets, notes = local_targets(scenario, [cpu_device()], tmp_path / "work")
    monkeypatch.setattr(session, "run_repeat", _fake_repeats(iter(values)))
    monkeypatch.setattr(session, "calibrate", lambda *_: True)
    # a class calibrated quiet: repeats are what decides here (the series level that
    # stops a sequential series has its own test below)
    monkeypatch.setattr(judge, "levels_against", lambda *_: levels)
    workload = next(w for w in scenario.workloads
                    if isinstance(w, InferenceWorkload) and w.label == WORKLOAD)
    with ResultStore.open(tmp_path / "r.db") as store:
        if baseline:
            _store_baseline(store, effective_workload(workload, True, overrides).key)
        return run_bench(scenario, targets[:1], notes, store, overrides=overrides,
                         workload_names=[WORKLOAD])


def test_until_decided_extends_an_undecided_pilot_to_a_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The looks are fixed from the pilot to the cap (3 to 20), whatever the pilot's
    noise; the series PASSes at look 2."""
    values = [985.0, 1000.0, 990.0] + [1001.0, 999.0, 1000.0, 1002.0] * 5
    outcome = _bench(tmp_path, monkeypatch, values, BenchOverrides(until_decided=True))
    [workload] = outcome.workloads
    assert len(workload.run_ids) == 6
    assert workload.comparison is not None and workload.comparison.verdict == "PASS"
    # the stored verdict is the design's: the repeated interval of look 2
    assert "repeated (look 2 of 7 at 6)" in workload.comparison.checks[0].reason
    notes = [n for n in workload.workload.notes if n.startswith("sequential repeats")]
    assert notes == ["sequential repeats: look 1 at 3: undecided, next look at 6 "
                     "(looks at 3, 6, 9, 12, 15, 18, 20)",
                     "sequential repeats: look 2 at 6: PASS, minimum detectable "
                     f"difference {workload.comparison.checks[0].mdd_pct:.2f}%"]


def test_max_repeats_caps_an_undecidable_series(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = [1010.0, 960.0, 1015.0, 965.0, 1005.0, 975.0] * 3  # -1.2%, very noisy
    outcome = _bench(tmp_path, monkeypatch, values,
                     BenchOverrides(until_decided=True, max_repeats=6))
    [workload] = outcome.workloads
    assert len(workload.run_ids) == 6
    assert workload.comparison is not None
    assert workload.comparison.verdict == "INCONCLUSIVE"
    last = workload.workload.notes[-1]
    assert "look 4 at 6: INCONCLUSIVE" in last  # looks at 3, 4, 5, 6
    assert "repeats in all" in last and "would decide" in last


def test_without_the_option_the_series_runs_its_repeats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    outcome = _bench(tmp_path, monkeypatch, [985.0, 1000.0, 990.0, 1.0], BenchOverrides())
    assert len(outcome.workloads[0].run_ids) == 3


def test_a_series_without_baseline_stops_at_its_pilot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    outcome = _bench(tmp_path, monkeypatch, [985.0, 1000.0, 990.0, 1.0],
                     BenchOverrides(until_decided=True), baseline=False)
    assert len(outcome.workloads[0].run_ids) == 3


def test_a_spent_budget_says_what_it_expects_and_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    outcome = _bench(tmp_path, monkeypatch, [985.0, 1000.0, 990.0, 1.0],
                     BenchOverrides(budget_s=1e-9))
    [workload] = outcome.workloads
    assert len(workload.run_ids) == 3
    [budget] = [n for n in workload.workload.notes if n.startswith("budget:")]
    assert budget.startswith(f"budget: {WORKLOAD}: ~6 repeats for a 2% verdict at CV ")
    assert budget.endswith("the budget affords 3: expect INCONCLUSIVE unless it is clear")


@pytest.mark.parametrize(("text", "seconds"), [("45m", 2700.0), ("2h", 7200.0),
                                              ("900s", 900.0), ("90", 90.0)])
def test_budget_durations(text: str, seconds: float) -> None:
    assert budget_s(text) == seconds


@pytest.mark.parametrize("text", ["", "45x", "-3m", "m"])
def test_bad_budget_durations(text: str) -> None:
    with pytest.raises(InputError):
        budget_s(text)


class _Clock:
    """time for the session: each faked repeat advances it by the next of ``steps``."""

    def __init__(self, steps: Sequence[float]) -> None:
        self.now = 0.0
        self.steps = iter(steps)

    def monotonic(self) -> float:
        return self.now


@pytest.mark.parametrize(("budget_s", "runs", "looks"), [
    (720.0, 5, "3, 5, 6, 8, 9, 11, 12"), (1e6, 20, "3, 6, 9, 12, 15, 18, 20")])
def test_a_budget_running_out_makes_the_next_look_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget_s: float, runs: int,
    looks: str,
) -> None:
    """Pilot 3 x 60 s in a 12 min budget affords 12 repeats: looks planned at 3, 5, 6, 8,
    9, 11, 12; repeats 4-5 take 300 s each, so at 5 no time is left: look 2 is the last
    and spends the rest of the alpha. With time to spare the same noisy series goes on
    to the cap."""
    clock = _Clock([60.0] * 3 + [300.0] * 30)
    monkeypatch.setattr(session, "time", clock)
    monkeypatch.setattr(pacing, "time", clock)
    values = iter([985.0, 1000.0, 990.0] + [970.0, 1010.0, 975.0, 1005.0] * 5)

    def advancing(values: Iterator[float]) -> Iterator[float]:
        for value in values:
            clock.now += next(clock.steps)
            yield value

    result = _bench(tmp_path, monkeypatch, advancing(values),
                    BenchOverrides(budget_s=budget_s)).workloads[0]
    assert len(result.run_ids) == runs
    notes = [n for n in result.workload.notes if n.startswith("sequential repeats")]
    second = looks.split(", ")[1]
    assert notes[0] == (f"sequential repeats: look 1 at 3: undecided, next look at "
                        f"{second} (looks at {looks})")
    assert notes[1].startswith(f"sequential repeats: look 2 at {second}: ")
    assert ("next look at" in notes[1]) == (runs > 5)
    # the stored verdict judges the look the budget made the last as the last: at the
    # level that spends the rest of the alpha, not at look 2's planned interim level
    assert result.comparison is not None
    [check] = result.comparison.checks
    plan = tuple(int(n) for n in looks.split(", "))
    cut = runs < plan[-1]
    assert check.last_look == cut
    assert check.looks == plan
    position = plan.index(runs) if runs in plan else len(plan) - 1
    assert check.level() == pytest.approx(look_level(plan, position, True, ALPHA / 2,
                                                     check.spending))
    if cut:
        assert check.level() > look_level(plan, position, False, ALPHA / 2, check.spending)
        assert "look 2 of 7 at 5, the last: the budget ran out" in check.reason
    # the last look stopped on the verdict the store keeps
    assert notes[-1].startswith(f"sequential repeats: look {len(notes)} at {runs}: "
                                f"{result.comparison.verdict}")


def test_a_series_level_larger_than_the_margin_stops_with_what_would_decide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Uncalibrated (series CV 2% assumed), a 2% tolerance cannot be decided by repeats:
    the first look stops and says how many series would be needed, instead of running
    repeats that cannot help."""
    values = [985.0, 1000.0, 990.0, 992.0, 988.0, 991.0, 989.0, 990.0]
    outcome = _bench(tmp_path, monkeypatch, values, BenchOverrides(until_decided=True),
                     levels=uncalibrated())
    result = outcome.workloads[0]
    assert len(result.run_ids) == 3
    note = next(n for n in result.workload.notes if n.startswith("sequential repeats"))
    assert "INCONCLUSIVE" in note and "more repeats cannot decide" in note
    assert "series per side" in note
