"""A real CPU hog beside one real run of an interleaved session (the twin bm6 and scenario
6, tiny resnet50 Offline on this machine's CPU), with disturbance judged: the block it
disturbed is set aside, named, and run again, and the session goes on to its verdict."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

import psutil
import pytest

from tests.labs.cpuhog import other_process_hog
from vgpu import catalog
from vgpu.bench.devices import cpu_device
from vgpu.bench.interleave import Side, run_interleaved
from vgpu.bench.local import local_targets
from vgpu.bench.outcome import QuietListener
from vgpu.bench.workload import BenchOverrides
from vgpu.container.spec import CACHE_ENV
from vgpu.results.disturbance import IGNORE_ENV, LIMITS, OTHER_CPU
from vgpu.results.series import load_series
from vgpu.results.store import ResultStore

pytestmark = pytest.mark.slow
WORKLOAD = "resnet50-offline"


class HogDuringOneRun(QuietListener):
    """Busy loops (one per core) through the first run whose phase names ``marker``."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.armed = False
        self.hogs: list[int] = []
        self.done = False
        self.phases: list[str] = []

    def phase(self, text: str) -> None:
        self.phases.append(text)
        self.armed = not self.done and self.marker in text

    def begin_round(self, instances: Sequence[str], expected_s: float) -> None:
        if self.armed:
            self.hogs = [other_process_hog() for _ in range(os.cpu_count() or 1)]
            time.sleep(0.3)

    def end_round(self) -> None:
        self.stop()

    def stop(self) -> None:
        for pid in self.hogs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.hogs:
            self.done, self.hogs = True, []


def _busy_share(seconds: float = 2.0) -> float:
    """Percent of the machine's CPU in use while this process sleeps: other load."""
    return float(psutil.cpu_percent(interval=seconds))


def test_a_block_a_cpu_hog_disturbed_is_set_aside_and_run_again(
        tmp_path: Path, harness_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    busy = _busy_share()
    if busy > LIMITS[OTHER_CPU]:
        pytest.skip(f"the machine is busy already ({busy:.0f}% of its CPU, beyond the "
                    f"{LIMITS[OTHER_CPU]:.0f}% that marks a run disturbed): the hog's run "
                    "cannot be told from the others")
    monkeypatch.delenv(IGNORE_ENV, raising=False)  # disturbance judged, as on a lab
    monkeypatch.setenv(CACHE_ENV, str(harness_cache))
    overrides = BenchOverrides(duration_s=1.0)
    sides = []
    for scenario_id in ("bm6", "6"):
        scenario = catalog.load(scenario_id)
        targets, notes = local_targets(scenario, [cpu_device()], tmp_path / scenario_id)
        sides.append(Side(scenario, targets[:1], notes, overrides))
    # block 2 runs the candidate first (ABBA): the hog is beside scenario 6's run
    listener = HogDuringOneRun("block 2/2, scenario 6")
    try:
        with ResultStore.open(tmp_path / "r.db") as store:
            ref_out, cand_out = run_interleaved(sides[0], sides[1], store, runs=2,
                                                workload_names=[WORKLOAD], listener=listener)
            runs = store.runs()
            stored = [m.name for m in store.metrics(runs[0].id) if m.instance is None]
            [mine] = cand_out.workloads
            series = load_series(store, mine.series_id)
    finally:
        listener.stop()
    assert listener.done, listener.phases  # the hog ran beside that run
    assert OTHER_CPU in stored and len(stored) == len(set(stored))  # each metric once
    set_aside = [r for r in runs if r.status == "aborted"]
    # the run beside the hog and its block's twin run; other load may have set aside more
    hogged = next((r for r in set_aside if r.scenario_id == "6" and r.repeat_index == 1
                   and r.reason and f"during run {r.id}" in r.reason), None)
    assert hogged is not None and hogged.reason is not None, [(r.id, r.reason) for r in runs]
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
