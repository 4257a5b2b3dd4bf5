"""`vgpu bench`: every inference workload of a scenario, repeated, on every target at once;
each repeat stored as a run; statistics and the verdict against the scenario's baseline."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Protocol

from vgpu.bench.calibrate import HEADROOM, calibrate_offline
from vgpu.bench.clock import clock_metrics
from vgpu.bench.collect import instance_result, server_split_metrics
from vgpu.bench.disturbance import disturbance_metrics
from vgpu.bench.fanout import InstanceOutcome, RoundListener, RoundTimeouts, run_round
from vgpu.bench.overlap import overlap_metrics, round_overlap, stability_metrics
from vgpu.bench.provenance import scenario_revision
from vgpu.bench.targets import Target
from vgpu.bench.triton import TritonSetup, deployed
from vgpu.bench.workload import BenchOverrides, EffectiveWorkload, effective_workload, harness_spec
from vgpu.errors import RemoteError
from vgpu.model.scenario import InferenceWorkload, Scenario
from vgpu.results.compare import Check, Comparison
from vgpu.results.format import number
from vgpu.results.judge import judge_against_baseline
from vgpu.results.records import Metric, RunStart
from vgpu.results.sequential import (
    Design,
    Pilot,
    budget_total,
    expectation,
    look,
    with_schedule,
)
from vgpu.results.series import SeriesData, load_series
from vgpu.results.server_split import Split, series_split
from vgpu.results.store import ResultStore
from vgpu.results.tokens import outcome_records, token_metrics


class BenchListener(RoundListener, Protocol):
    def phase(self, text: str) -> None: ...

    def begin_round(self, instances: Sequence[str], expected_s: float) -> None: ...

    def end_round(self) -> None: ...


class QuietListener:
    def phase(self, text: str) -> None:
        return None

    def begin_round(self, instances: Sequence[str], expected_s: float) -> None:
        return None

    def end_round(self) -> None:
        return None

    def state(self, instance: str, text: str) -> None:
        return None

    def tick(self, elapsed_s: float) -> None:
        return None


@dataclass
class WorkloadOutcome:
    workload: EffectiveWorkload
    series_id: str
    run_ids: list[int] = field(default_factory=list)
    failure: str | None = None
    series: SeriesData | None = None
    comparison: Comparison | None = None
    baseline_note: str | None = None
    calibrated_qps: dict[str, float] = field(default_factory=dict)
    server_split: Split = field(default_factory=dict)  # Triton: instance -> part -> us
    # interleaved with another series block by block: {"partner", "order", "role"}
    design: dict[str, str] | None = None


@dataclass
class BenchOutcome:
    scenario: Scenario
    targets: list[Target]
    notes: list[str]
    workloads: list[WorkloadOutcome] = field(default_factory=list)

    @property
    def failure(self) -> str | None:
        return next((w.failure for w in self.workloads if w.failure), None)

    @property
    def comparisons(self) -> list[Comparison]:
        return [w.comparison for w in self.workloads if w.comparison is not None]


def inference_workloads(
    scenario: Scenario, names: Sequence[str] | None
) -> tuple[list[InferenceWorkload], list[str]]:
    """The workloads to run (all inference ones, or those named) and notes on the rest."""
    notes = [f"workload {w.label} is a training workload: run it with the training commands"
             for w in scenario.workloads if not isinstance(w, InferenceWorkload)]
    chosen = [w for w in scenario.workloads if isinstance(w, InferenceWorkload)]
    if names:
        chosen = [w for w in chosen if w.label in names]
    return chosen, notes


def _judge(store: ResultStore, scenario: Scenario, outcome: WorkloadOutcome) -> None:
    if outcome.series is None:
        return
    outcome.comparison, outcome.baseline_note = judge_against_baseline(
        store, scenario, outcome.series)


def run_bench(
    scenario: Scenario,
    targets: list[Target],
    target_notes: list[str],
    store: ResultStore,
    *,
    runs: int | None = None,
    overrides: BenchOverrides = BenchOverrides(),
    workload_names: Sequence[str] | None = None,
    listener: BenchListener | None = None,
    timeouts: RoundTimeouts = RoundTimeouts(),
    triton: TritonSetup | None = None,
) -> BenchOutcome:
    """Run, store and judge. Stops at the first failed repeat; Ctrl-C stops every
    instance, stores the run as aborted and re-raises KeyboardInterrupt. A Triton
    workload without ``overrides.triton_url`` gets a server per host for its rounds
    (``triton``, default: the scenario's guest.triton_image), removed afterwards."""
    listen: BenchListener = listener or QuietListener()
    workloads, notes = inference_workloads(scenario, workload_names)
    outcome = BenchOutcome(scenario=scenario, targets=targets, notes=[*target_notes, *notes])
    on_cpu = all(t.device.get("kind") == "cpu" for t in targets)
    repeats = runs or scenario.repeats
    budget = _Budget.of(overrides, len(workloads))
    for workload in workloads:
        effective = effective_workload(workload, on_cpu, overrides)
        if (effective.min_valid or 0) > repeats:
            effective.notes.append(f"min_valid {effective.min_valid} is more than the "
                                   f"{repeats} repeats: every repeat must be VALID")
        result = WorkloadOutcome(workload=effective, series_id=uuid.uuid4().hex)
        outcome.workloads.append(result)
        series = partial(_run_series, store, scenario, targets, result, repeats, overrides,
                         listen, timeouts, _pacing(overrides, repeats, budget))
        if effective.deploys_triton:
            _with_triton(series, targets, result, listen, store.logs_root / "triton",
                         triton or TritonSetup(image=scenario.guest.triton_image))
        else:
            series()
        if store.runs(series_id=result.series_id, status="ok"):
            result.series = load_series(store, result.series_id)
            result.server_split = series_split(store, result.series)
        _judge(store, scenario, result)
        if result.failure:
            break
    return outcome


def _with_triton(series: Callable[[], None], targets: list[Target], result: WorkloadOutcome,
                 listen: BenchListener, log_root: Path, setup: TritonSetup) -> None:
    """Runs ``series`` against one Triton server per host, deployed for it; a server that
    does not come up fails the workload before any run begins (nothing stored)."""
    effective = result.workload
    try:
        with deployed(targets, effective, setup, result.series_id[:10],
                      log_root / result.series_id, listen.phase) as hosts:
            effective.triton = {"image": setup.image, "deployed": True,
                                "servers": {h.host: h.describe() for h in hosts}}
            for host in hosts:
                assert host.spec is not None
                effective.triton_urls.update(
                    {t.instance: host.spec.grpc_url for t in host.targets})
                effective.notes.append(
                    f"Triton: container {host.spec.name} of {setup.image} on {host.host}, "
                    f"{host.kind} backend on KIND_{host.device.upper()}, max batch "
                    f"{effective.batch}, ready in {host.ready_s or 0:.1f} s")
            series()
    except RemoteError as exc:
        result.failure = f"Triton server: {exc}"


def _run_series(
    store: ResultStore, scenario: Scenario, targets: list[Target], result: WorkloadOutcome,
    repeats: int, overrides: BenchOverrides, listen: BenchListener, timeouts: RoundTimeouts,
    pacing: _Pacing | None = None,
) -> None:
    effective = result.workload
    offline_unknown = effective.scenario == "Offline" and effective.target_qps is None
    if offline_unknown and not _calibrate(store, targets, result, overrides, listen, timeouts):
        return
    total, repeat, started = repeats, 0, time.monotonic()
    while repeat < total:
        listen.phase(f"{effective.label}: repeat {repeat + 1}/{total}")
        outcomes = _run_repeat(store, scenario, targets, result, repeat, total, overrides,
                               listen, timeouts)
        if outcomes is None:
            return
        repeat += 1
        if repeat == total and pacing is not None:
            total = pacing.next_total(store, scenario, result, total,
                                      time.monotonic() - started, listen)
        if result.calibrated_qps and repeat < total:
            _recalibrate(result, outcomes)


def _calibrate(
    store: ResultStore, targets: list[Target], result: WorkloadOutcome,
    overrides: BenchOverrides, listen: BenchListener, timeouts: RoundTimeouts,
) -> bool:
    """Probes each instance's Offline rate into ``result.calibrated_qps``; False (with
    ``result.failure`` set, nothing stored: no run began) when the probe round failed."""
    effective = result.workload
    listen.phase(f"{effective.label}: probing the Offline rate of each instance")
    probe_root = store.logs_root / "probes" / result.series_id
    listen.begin_round([t.instance for t in targets], 2.0)
    try:
        result.calibrated_qps = calibrate_offline(
            targets, effective, lambda n, inst: probe_root / f"probe-{n}" / inst,
            listen, timeouts, seed=overrides.seed,
        )
    except RemoteError as exc:
        result.failure = str(exc)
        return False
    finally:
        listen.end_round()
    rates = ", ".join(f"{k} {number(v)}/s" for k, v in result.calibrated_qps.items())
    effective.notes.append(f"Offline expected QPS from a probe round (x{HEADROOM}): {rates}")
    return True


def _begin_run(store: ResultStore, scenario: Scenario, targets: list[Target],
               result: WorkloadOutcome, repeat: int, repeats: int) -> int:
    effective = result.workload
    run_id = store.begin_run(RunStart(
        series_id=result.series_id, scenario_id=scenario.id, scenario_name=scenario.name,
        workload=effective.key, target_kind=targets[0].target_kind, repeat_index=repeat,
        scenario_file=scenario.source, scenario_revision=scenario_revision(scenario.source),
        workload_detail={**effective.detail(), "calibrated_qps": result.calibrated_qps,
                         "repeats": repeats, "min_valid": valid_floor(effective, repeats),
                         "instances": {t.instance: t.device_label for t in targets},
                         **({"design": result.design} if result.design else {})},
    ))
    result.run_ids.append(run_id)
    return run_id


def _run_repeat(
    store: ResultStore, scenario: Scenario, targets: list[Target], result: WorkloadOutcome,
    repeat: int, repeats: int, overrides: BenchOverrides, listen: BenchListener,
    timeouts: RoundTimeouts,
) -> Sequence[InstanceOutcome] | None:
    """One repeat on every target, stored as a run; its instance outcomes, or None (with
    ``result.failure`` set) when it failed."""
    effective = result.workload
    run_id = _begin_run(store, scenario, targets, result, repeat, repeats)
    specs = {
        t.instance: harness_spec(
            effective, instance=t.instance, device=t.device, threads=t.threads,
            seed=overrides.seed, target_qps=result.calibrated_qps.get(t.instance),
        ).to_json()
        for t in targets
    }
    listen.begin_round([t.instance for t in targets], effective.duration_s)
    try:
        round_result = run_round(
            targets, specs, {t.instance: store.log_dir(run_id, t.instance) for t in targets},
            tag=f"run-{run_id}", expected_s=effective.duration_s, listener=listen,
            timeouts=timeouts,
        )
    except KeyboardInterrupt:
        store.finish_run(run_id, "aborted",
                         reason="interrupted (Ctrl-C); every harness instance was stopped")
        raise
    except RemoteError as exc:  # a host became unreachable while staging or starting
        store.finish_run(run_id, "failed", reason=str(exc))
        result.failure = f"run {run_id}: {exc}"
        return None
    finally:
        listen.end_round()
    store.finish_run(
        run_id, "failed" if round_result.failure else "ok", reason=round_result.failure,
        instances=[instance_result(o) for o in round_result.outcomes],
        metrics=[*(m for o in round_result.outcomes for m in server_split_metrics(o)),
                 *clock_metrics((t.instance, t.clock) for t in targets if t.clock),
                 *_measurement_metrics(round_result.outcomes),
                 *disturbance_metrics(round_result.outcomes),
                 *token_metrics(outcome_records(round_result.outcomes))],
        sync_skew_s=round_result.skew_s,
    )
    if round_result.failure:
        result.failure = f"run {run_id}: {round_result.failure}"
        return None
    return round_result.outcomes


def valid_floor(workload: EffectiveWorkload, repeats: int) -> int:
    """The fewest VALID repeats a PASS needs: --min-valid or the workload's min_valid,
    at most the repeats run; by default all of them."""
    return min(workload.min_valid or repeats, repeats)


def _measurement_metrics(outcomes: Sequence[InstanceOutcome]) -> list[Metric]:
    """How the repeat was measured: each instance's warm-up windows and the share of the
    timed span all instances ran together (with their throughput inside it)."""
    records = {o.target.instance: o.record or {} for o in outcomes}
    return [*(m for name, record in records.items()
              for m in stability_metrics(name, record.get("stability"))),
            *overlap_metrics(round_overlap(records))]


def _recalibrate(result: WorkloadOutcome, outcomes: Sequence[InstanceOutcome]) -> None:
    """An Offline run that ended before its min duration was expected too few samples:
    the next repeats expect the rate this run measured."""
    for outcome in outcomes:
        record = outcome.record or {}
        rate = (record.get("throughput") or {}).get("samples_per_second")
        if (record.get("validity") or {}).get("min_duration_met") is False and rate:
            name = outcome.target.instance
            result.calibrated_qps[name] = float(rate) * HEADROOM
            result.workload.notes.append(
                f"{name} finished before the min duration: expected QPS raised to "
                f"{number(result.calibrated_qps[name])}/s for the next repeats")


@dataclass
class _Budget:
    """--budget: the wall time left, shared by the workloads still to run."""

    deadline: float  # time.monotonic() at which the budget ends
    workloads_left: int

    @classmethod
    def of(cls, overrides: BenchOverrides, workloads: int) -> _Budget | None:
        if overrides.budget_s is None:
            return None
        return cls(time.monotonic() + overrides.budget_s, workloads)


@dataclass
class _Pacing:
    """--until-decided / --budget for one series: its looks so far (vgpu.results.sequential)."""

    design: Design
    budget: _Budget | None
    looks: int = 0

    def next_total(self, store: ResultStore, scenario: Scenario, result: WorkloadOutcome,
                   total: int, elapsed_s: float, listen: BenchListener) -> int:
        """The series' new total after a look at its ``total`` repeats (``total``: stop)."""
        if not store.runs(series_id=result.series_id, status="ok"):
            return total
        series = load_series(store, result.series_id)
        comparison, _ = judge_against_baseline(store, scenario, series)
        checks = comparison.checks if comparison else []
        blocked = bool(comparison and comparison.shortfalls)
        if self.budget is not None:
            note = self._follow_budget(series, scenario, checks, blocked, total, elapsed_s)
            if note:
                result.workload.notes.append(note)
                listen.phase(note)
        self.looks += 1
        step = look(checks, total, self.looks, self.design, blocked,
                    comparison.disturbed if comparison else ())
        self.design = with_schedule(self.design, step)
        result.workload.notes.append(f"sequential repeats: {step.describe()}")
        listen.phase(f"{result.workload.label}: {step.describe()}")
        return step.next_total

    def _follow_budget(self, series: SeriesData, scenario: Scenario, checks: list[Check],
                       blocked: bool, total: int, elapsed_s: float) -> str | None:
        """After the pilot: caps the series at the repeats the budget affords it and says
        what it expects to decide. At a later look: no time left for one more repeat
        makes this look the last."""
        assert self.budget is not None
        repeat_s = elapsed_s / total
        remaining = self.budget.deadline - time.monotonic()
        if self.looks > 0:
            if remaining < repeat_s:
                self.design = replace(self.design, max_repeats=total)
            return None
        self.budget.workloads_left -= 1
        if not checks:
            return None
        first = look(checks, total, 1, self.design, blocked)
        planned = first.schedule[-1] if first.schedule else total
        cv = series.throughput_cv
        pilot = Pilot(series.workload.split(" (")[0], total, repeat_s,
                      None if cv is None else cv * 100.0, scenario.tolerances.throughput_pct)
        cap = budget_total(pilot, remaining, self.budget.workloads_left, self.design)
        self.design = replace(self.design, max_repeats=cap)
        return f"budget: {expectation(pilot, planned, cap)}"


def _pacing(overrides: BenchOverrides, repeats: int, budget: _Budget | None,
            step: int = 1, always: bool = False) -> _Pacing | None:
    """The sequential design of --until-decided / --budget (``always``: also without
    them, as an interleaved comparison without a fixed --runs is); ``step`` 2 for ABBA
    blocks (every look at complete pairs)."""
    if not (always or overrides.until_decided or budget is not None):
        return None
    cap = max(repeats, overrides.max_repeats or Design().max_repeats)
    cap -= cap % step
    return _Pacing(Design(min_repeats=repeats, max_repeats=max(cap, repeats), step=step),
                   budget)


@dataclass(frozen=True)
class Side:
    """One side of an interleaved comparison: a scenario on its connected targets."""

    scenario: Scenario
    targets: list[Target]
    notes: list[str]
    overrides: BenchOverrides


def run_interleaved(
    reference: Side, candidate: Side, store: ResultStore, *, runs: int | None,
    workload_names: Sequence[str], listener: BenchListener | None = None,
    timeouts: RoundTimeouts = RoundTimeouts(),
) -> tuple[BenchOutcome, BenchOutcome]:
    """Both scenarios' workloads of ``workload_names`` in alternating blocks of one repeat
    each, ABBA (reference, candidate | candidate, reference | ...), each side a series of
    its own that names the other as its partner, so the candidate is judged block by block
    and drift between minutes cancels. Without a fixed ``runs`` (or with --until-decided,
    --budget), blocks are added at looks planned from the pilot's noise until the verdict
    decides or the stated cap (--max-repeats, --budget) is reached
    (vgpu.results.sequential). The block count is even (complete ABBA pairs), and
    each side first runs one warm-up run that is not judged (the session's first runs are
    cold). Offline sides share one expected QPS per instance position (the larger probe),
    so their queries have the same size."""
    listen: BenchListener = listener or QuietListener()
    ref_workloads, _ = inference_workloads(reference.scenario, workload_names)
    cand_workloads, notes = inference_workloads(candidate.scenario, workload_names)
    outcomes = (BenchOutcome(reference.scenario, reference.targets, list(reference.notes)),
                BenchOutcome(candidate.scenario, candidate.targets, [*candidate.notes, *notes]))
    repeats = runs or candidate.scenario.repeats
    repeats += repeats % 2  # complete ABBA pairs
    budget = _Budget.of(candidate.overrides, len(cand_workloads))
    for cand_w in cand_workloads:
        ref_w = next(w for w in ref_workloads if w.label == cand_w.label)
        pair = (_side_outcome(reference, ref_w), _side_outcome(candidate, cand_w))
        for mine, other, role in ((pair[0], pair[1], "reference"),
                                  (pair[1], pair[0], "candidate")):
            mine.design = {"partner": other.series_id, "order": "ABBA", "role": role}
        outcomes[0].workloads.append(pair[0])
        outcomes[1].workloads.append(pair[1])
        _run_blocks(store, (reference, candidate), pair, repeats, listen, timeouts, budget,
                    sequential=runs is None)
        for side, result in zip((reference, candidate), pair, strict=True):
            if store.runs(series_id=result.series_id, status="ok"):
                result.series = load_series(store, result.series_id)
                result.server_split = series_split(store, result.series)
            _judge(store, side.scenario, result)
        if pair[0].failure or pair[1].failure:
            break
    return outcomes


def _side_outcome(side: Side, workload: InferenceWorkload) -> WorkloadOutcome:
    on_cpu = all(t.device.get("kind") == "cpu" for t in side.targets)
    return WorkloadOutcome(workload=effective_workload(workload, on_cpu, side.overrides),
                           series_id=uuid.uuid4().hex)


def _run_blocks(store: ResultStore, sides: tuple[Side, Side],
                pair: tuple[WorkloadOutcome, WorkloadOutcome], repeats: int,
                listen: BenchListener, timeouts: RoundTimeouts, budget: _Budget | None,
                sequential: bool) -> None:
    for index, (side, result) in enumerate(zip(sides, pair, strict=True)):
        effective = result.workload
        if effective.scenario == "Offline" and effective.target_qps is None and \
                not _calibrate(store, side.targets, result, side.overrides, listen, timeouts):
            pair[1 - index].failure = f"stopped with scenario {side.scenario.id}"
            return
    _share_rates(sides, pair)
    for index, (side, result) in enumerate(zip(sides, pair, strict=True)):
        if not _warm_up(store, side, result, listen, timeouts):
            pair[1 - index].failure = f"stopped with scenario {side.scenario.id}"
            return
    _share_rates(sides, pair)
    candidate = sides[1]
    pacing = _pacing(candidate.overrides, repeats, budget, step=2, always=sequential)
    if pacing is not None:
        stated = (f"interleaved blocks: looks planned from the pilot's noise after {repeats} "
                  f"blocks; at most {pacing.design.max_repeats} blocks "
                  f"({2 * pacing.design.max_repeats} runs) unless decided sooner "
                  "(--max-repeats, --budget)")
        pair[1].workload.notes.append(stated)
        listen.phase(f"{pair[1].workload.label}: {stated}")
    total, block, started = repeats, 0, time.monotonic()
    while block < total:
        order = (0, 1) if block % 2 == 0 else (1, 0)
        for index in order:
            side, result = sides[index], pair[index]
            listen.phase(f"{result.workload.label}: block {block + 1}/{total}, scenario "
                         f"{side.scenario.id}")
            ran = _run_repeat(store, side.scenario, side.targets, result, block, total,
                              side.overrides, listen, timeouts)
            if ran is None:
                pair[1 - index].failure = f"stopped with scenario {side.scenario.id}"
                return
            if result.calibrated_qps:
                _recalibrate(result, ran)
        _share_rates(sides, pair)
        block += 1
        if block == total and pacing is not None:
            total = pacing.next_total(store, candidate.scenario, pair[1], total,
                                      time.monotonic() - started, listen)


def _warm_up(store: ResultStore, side: Side, result: WorkloadOutcome, listen: BenchListener,
             timeouts: RoundTimeouts) -> bool:
    """One run of ``result``'s workload on ``side`` before the judged blocks, not stored
    as a run (its logs under logs/warmup/): a session's first run is cold (caches, clocks,
    lazy initialisation) and would fall into one block only. False, with
    ``result.failure`` set, when it failed."""
    effective = result.workload
    listen.phase(f"{effective.label}: warm-up run, scenario {side.scenario.id} (not judged)")
    root = store.logs_root / "warmup" / result.series_id
    specs = {t.instance: harness_spec(
        effective, instance=t.instance, device=t.device, threads=t.threads,
        seed=side.overrides.seed, target_qps=result.calibrated_qps.get(t.instance),
    ).to_json() for t in side.targets}
    listen.begin_round([t.instance for t in side.targets], effective.duration_s)
    try:
        warm = run_round(side.targets, specs, {t.instance: root / t.instance
                                               for t in side.targets},
                         tag=f"warmup-{result.series_id[:8]}",
                         expected_s=effective.duration_s, listener=listen,
                         timeouts=timeouts)
    except RemoteError as exc:
        result.failure = f"warm-up run: {exc}"
        return False
    finally:
        listen.end_round()
    if warm.failure:
        result.failure = f"warm-up run: {warm.failure}"
        return False
    if result.calibrated_qps:
        _recalibrate(result, warm.outcomes)
    return True


def _share_rates(sides: tuple[Side, Side],
                 pair: tuple[WorkloadOutcome, WorkloadOutcome]) -> None:
    """One expected Offline QPS per instance position for both sides: the larger."""
    ref, cand = pair
    if not (ref.calibrated_qps and cand.calibrated_qps) or \
            len(sides[0].targets) != len(sides[1].targets):
        return
    for ref_t, cand_t in zip(sides[0].targets, sides[1].targets, strict=True):
        shared = max(ref.calibrated_qps[ref_t.instance], cand.calibrated_qps[cand_t.instance])
        ref.calibrated_qps[ref_t.instance] = cand.calibrated_qps[cand_t.instance] = shared
