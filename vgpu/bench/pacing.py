"""How many repeats a series runs: --until-decided looks at the series after each
round of repeats (vgpu.results.verdict.sequential), and --budget shares the wall time left among
the workloads still to run."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from vgpu.bench.judging import reference_for
from vgpu.bench.outcome import BenchListener, WorkloadOutcome
from vgpu.bench.workload import BenchOverrides
from vgpu.model.scenario import Scenario
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SeriesData, load_series
from vgpu.results.verdict.compare import Check
from vgpu.results.verdict.judge import comparison_at_look
from vgpu.results.verdict.sequential import (
    DEFAULT_MAX_BLOCKS,
    DEFAULT_MAX_REPEATS,
    Design,
    Pilot,
    budget_total,
    expectation,
    look,
    with_schedule,
)


@dataclass
class Budget:
    """--budget: the wall time left, shared by the workloads still to run."""

    deadline: float  # time.monotonic() at which the budget ends
    workloads_left: int

    @classmethod
    def of(cls, overrides: BenchOverrides, workloads: int) -> Budget | None:
        if overrides.budget_s is None:
            return None
        return cls(time.monotonic() + overrides.budget_s, workloads)


@dataclass
class Pacing:
    """--until-decided / --budget for one series: its looks so far
    (vgpu.results.verdict.sequential)."""

    design: Design
    budget: Budget | None
    looks: int = 0

    def next_total(self, store: ResultStore, scenario: Scenario, result: WorkloadOutcome,
                   total: int, elapsed_s: float, listen: BenchListener) -> int:
        """The series' new total after a look at its ``total`` repeats (``total``: stop).
        The look judges nothing and stores nothing: the series' verdict is made once it
        has run (vgpu.bench.judging)."""
        if not store.runs(series_id=result.series_id, status="ok"):
            return total
        if self.looks > 0 and self._budget_spent(total, elapsed_s):
            # decided on time alone, before the look: the look and the stored verdict
            # both judge this look as the last, at the level that spends what is left
            self.design = replace(self.design, max_repeats=total)
            store.end_series_design(result.series_id, total)
        series = load_series(store, result.series_id)
        comparison = comparison_at_look(store, series,
                                        reference_for(store, scenario, result, series))
        checks = comparison.checks if comparison else []
        blocked = bool(comparison and comparison.shortfalls)
        if self.budget is not None and self.looks == 0:
            note = self._share_budget(series, scenario, checks, blocked, total, elapsed_s)
            if note:
                result.workload.notes.append(note)
                listen.phase(note)
        self.looks += 1
        step = look(checks, total, self.looks, self.design, blocked,
                    comparison.disturbed if comparison else (),
                    comparison.confounded if comparison else ())
        self.design = with_schedule(self.design, step)
        if step.schedule and not step.stop:  # the runs to come store the looks
            result.design = {**(result.design or {}),
                             "looks": ",".join(map(str, step.schedule))}
        result.workload.notes.append(f"sequential repeats: {step.describe()}")
        listen.phase(f"{result.workload.label}: {step.describe()}")
        return step.next_total

    def _budget_spent(self, total: int, elapsed_s: float) -> bool:
        """At a look after the first: no time is left for one more repeat before the
        design's planned last look."""
        if self.budget is None or total >= self.design.max_repeats:
            return False
        return self.budget.deadline - time.monotonic() < elapsed_s / total

    def _share_budget(self, series: SeriesData, scenario: Scenario, checks: list[Check],
                      blocked: bool, total: int, elapsed_s: float) -> str | None:
        """After the pilot: caps the series at the repeats the budget affords it and says
        what it expects to decide."""
        assert self.budget is not None
        repeat_s = elapsed_s / total
        remaining = self.budget.deadline - time.monotonic()
        self.budget.workloads_left -= 1
        if not checks:
            return None
        first = look(checks, total, 1, self.design, blocked)
        planned = first.expected or total
        cv = series.throughput_cv
        pilot = Pilot(series.identity.name, total, repeat_s,
                      None if cv is None else cv * 100.0, scenario.tolerances.throughput_pct)
        cap = budget_total(pilot, remaining, self.budget.workloads_left, self.design)
        self.design = replace(self.design, max_repeats=cap)
        return f"budget: {expectation(pilot, planned, cap)}"


def pacing_for(overrides: BenchOverrides, repeats: int, budget: Budget | None,
               step: int = 1, always: bool = False,
               default_cap: int | None = None, family: int = 1) -> Pacing | None:
    """The sequential design of --until-decided / --budget (``always``: also without
    them, as an interleaved comparison without a fixed --runs is); ``step`` 2 for ABBA
    blocks (every look at complete pairs); ``default_cap`` the cap without
    --max-repeats (else the design's default for the step); ``family`` the workloads the
    command judges as one family (a look's FAIL at the series' share of it)."""
    if not (always or overrides.until_decided or budget is not None):
        return None
    default = default_cap or (DEFAULT_MAX_BLOCKS if step == 2 else DEFAULT_MAX_REPEATS)
    cap = max(repeats, overrides.max_repeats or default)
    cap -= cap % step
    return Pacing(Design(min_repeats=repeats, max_repeats=max(cap, repeats), step=step,
                         family=max(1, family)), budget)
