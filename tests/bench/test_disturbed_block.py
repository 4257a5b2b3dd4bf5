"""A real CPU hog beside one real run of an interleaved session (the twin bm6 and scenario
6, tiny resnet50 Offline on this machine's CPU), with disturbance judged: the block it
disturbed is set aside, named, and run again, and the session goes on to its verdict.

The machine may be busy already (another job, a shared developer box). The hog must
then still be the disturbance that is seen, and the neighbour none: the session's first
block, run before the hog, measures what the neighbour takes; on a quiet machine the
stated limit stays, on a busy one this session's limit is put halfway between the
neighbour's worst run and the whole machine, and the hog is made heavy enough (one
session per busy loop, so each takes a share of its own) to leave the run an eighth of
what the neighbour left it."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.labs.cpuhog import other_process_hog, stop_hogs
from vgpu import catalog
from vgpu.bench.interleave import Side, run_interleaved
from vgpu.bench.outcome import QuietListener
from vgpu.bench.workload import BenchOverrides
from vgpu.container.spec import CACHE_ENV
from vgpu.results.store.disturbance import IGNORE_ENV, LIMITS, OTHER_CPU
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import load_series
from vgpu.targets.devices import cpu_device
from vgpu.targets.local import local_targets

pytestmark = pytest.mark.slow
WORKLOAD = "resnet50-offline"
STATED_LIMIT = LIMITS[OTHER_CPU]
MAX_HOGS = 64


def neighbour_limit(worst_other: float) -> float:
    """The other-CPU limit (percent) under which the neighbour's runs stay: the stated
    one on a quiet machine, else halfway between the neighbour's worst and all of it."""
    if worst_other <= STATED_LIMIT:
        return STATED_LIMIT
    return worst_other + (100.0 - worst_other) / 2


def hogs_for(worst_other: float, cores: int) -> int:
    """Busy loops enough to leave the run an eighth of the share the neighbour left it
    (each loop, a session of its own, takes as much as the run's session), well under
    the half that ``neighbour_limit`` allows a run."""
    if worst_other <= STATED_LIMIT:
        return cores
    left = max(100.0 - worst_other, 1.0)
    return min(MAX_HOGS, max(cores, math.ceil(8 * 100.0 / left)))


class HogDuringOneRun(QuietListener):
    """Busy loops through the first run whose phase names ``marker``; before it, sets
    this session's disturbance limit from the runs stored so far (the neighbour's)."""

    def __init__(self, store: ResultStore, marker: str) -> None:
        self.store = store
        self.marker = marker
        self.armed = False
        self.hogs: list[int] = []
        self.done = False
        self.phases: list[str] = []
        self.neighbour: list[float] = []  # other-CPU percent of each run before the hog
        self.hog_count = 0

    def phase(self, text: str) -> None:
        self.phases.append(text)
        self.armed = not self.done and self.marker in text
        if self.armed and not self.neighbour:
            self.neighbour = [m.value for run in self.store.runs() if run.status == "ok"
                              for m in self.store.metrics(run.id)
                              if m.name == OTHER_CPU and m.instance is None]
            worst = max(self.neighbour, default=0.0)
            LIMITS[OTHER_CPU] = neighbour_limit(worst)
            self.hog_count = hogs_for(worst, os.cpu_count() or 1)

    def begin_round(self, instances: Sequence[str], expected_s: float) -> None:
        if self.armed:
            self.hogs = [other_process_hog() for _ in range(self.hog_count)]
            time.sleep(0.3)

    def end_round(self) -> None:
        self.stop()

    def stop(self) -> None:
        stop_hogs(self.hogs)
        if self.hogs:
            self.done, self.hogs = True, []

    def describe(self) -> str:
        return (f"neighbour's runs {[round(v) for v in self.neighbour]}% other CPU, limit "
                f"{LIMITS[OTHER_CPU]:.0f}%, {self.hog_count} hogs")


def test_the_limit_stays_on_a_quiet_machine_and_clears_a_busy_neighbour() -> None:
    assert neighbour_limit(3.0) == STATED_LIMIT and hogs_for(3.0, 2) == 2
    assert neighbour_limit(60.0) == 80.0 and hogs_for(60.0, 2) == 20
    # the hog leaves the run (one share among 1 + hogs) an eighth of its 40%
    assert 100.0 / (1 + hogs_for(60.0, 2)) < 40.0 / 8
    assert hogs_for(99.9, 2) == MAX_HOGS and neighbour_limit(99.9) < 100.0


def test_a_block_a_cpu_hog_disturbed_is_set_aside_and_run_again(
        tmp_path: Path, harness_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IGNORE_ENV, raising=False)  # disturbance judged, as on a lab
    monkeypatch.setenv(CACHE_ENV, str(harness_cache))
    # no run before the hog is set aside: they measure the neighbour (HogDuringOneRun)
    monkeypatch.setitem(LIMITS, OTHER_CPU, 100.0)
    overrides = BenchOverrides(duration_s=1.0)
    sides = []
    for scenario_id in ("bm6", "6"):
        scenario = catalog.load(scenario_id)
        targets, notes = local_targets(scenario, [cpu_device()], tmp_path / scenario_id)
        sides.append(Side(scenario, targets[:1], notes, overrides))
    with ResultStore.open(tmp_path / "r.db") as store:
        # block 2 runs the candidate first (ABBA): the hog is beside scenario 6's run
        listener = HogDuringOneRun(store, "block 2/2, scenario 6")
        try:
            ref_out, cand_out = run_interleaved(sides[0], sides[1], store, runs=2,
                                                workload_names=[WORKLOAD], listener=listener)
        finally:
            listener.stop()
        runs = store.runs()
        stored = [m.name for m in store.metrics(runs[0].id) if m.instance is None]
        [mine] = cand_out.workloads
        series = load_series(store, mine.series_id)
        others = {r.id: [m.value for m in store.metrics(r.id)
                         if m.name == OTHER_CPU and m.instance is None] for r in runs}
    assert listener.done, listener.phases  # the hog ran beside that run
    assert OTHER_CPU in stored and len(stored) == len(set(stored))  # each metric once
    set_aside = [r for r in runs if r.status == "aborted"]
    # the run beside the hog and its block's twin run; other load may have set aside more
    hogged = next((r for r in set_aside if r.scenario_id == "6" and r.repeat_index == 1
                   and r.reason and f"during run {r.id}" in r.reason), None)
    assert hogged is not None and hogged.reason is not None, (
        listener.describe(), [(r.id, r.status, others[r.id], r.reason) for r in runs])
    assert "other processes used" in hogged.reason
    assert any(r.scenario_id == "bm6" and r.repeat_index == 1 for r in set_aside)
    note = next(n for n in mine.workload.notes if f"during run {hogged.id}" in n)
    assert note.startswith("block 2 set aside") and "run again, replacement" in note
    # the block ran again: each side two blocks, none disturbed, and a verdict of its own
    ok = [r for r in runs if r.status == "ok"]
    assert sorted((r.scenario_id, r.repeat_index) for r in ok) == [
        ("6", 0), ("6", 1), ("bm6", 0), ("bm6", 1)]
    assert not series.disturbed_runs
    assert mine.comparison is not None and not mine.comparison.disturbed
    assert ref_out.failure is None and cand_out.failure is None
