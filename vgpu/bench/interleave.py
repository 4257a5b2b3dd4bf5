"""A scenario interleaved with another (its bare-metal twin): both scenarios' workloads
in alternating blocks of one repeat each, ABBA, each side a series of its own."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from vgpu.bench.capacity_plan import (
    CAPACITY_MAX_BLOCKS,
    PILOT_BLOCKS,
    plan_note,
    warm_starts,
)
from vgpu.bench.fanout import InstanceOutcome, RoundTimeouts, run_round
from vgpu.bench.judging import judge_workloads
from vgpu.bench.outcome import BenchListener, BenchOutcome, QuietListener, WorkloadOutcome
from vgpu.bench.pacing import Budget, Pacing, pacing_for
from vgpu.bench.session import calibrate, inference_workloads, recalibrate, run_repeat
from vgpu.bench.setaside import MAX_REPLACED_BLOCKS, DisturbedBlocks
from vgpu.bench.timeplan import job_outline, plan_blocks
from vgpu.bench.workload import (
    BenchOverrides,
    EffectiveWorkload,
    effective_workload,
    harness_spec,
)
from vgpu.errors import RemoteError
from vgpu.model.scenario import InferenceWorkload, Scenario
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import load_series
from vgpu.results.verdict.sequential import schedule
from vgpu.results.views.server_split import series_split
from vgpu.targets.target import Target


@dataclass(frozen=True)
class Side:
    """One side of an interleaved comparison: a scenario on its connected targets."""

    scenario: Scenario
    targets: list[Target]
    notes: list[str]
    overrides: BenchOverrides

    def effective(self, workload: InferenceWorkload) -> EffectiveWorkload:
        """What ``workload`` becomes on this side's devices."""
        on_cpu = all(t.device.get("kind") == "cpu" for t in self.targets)
        return effective_workload(workload, on_cpu, self.overrides)


def run_interleaved(
    reference: Side, candidate: Side, store: ResultStore, *, runs: int | None,
    workload_names: Sequence[str], listener: BenchListener | None = None,
    timeouts: RoundTimeouts = RoundTimeouts(),
) -> tuple[BenchOutcome, BenchOutcome]:
    """Both scenarios' workloads of ``workload_names`` in alternating blocks of one repeat
    each, ABBA (reference, candidate | candidate, reference | ...), each side a series of
    its own that names the other as its partner, so the candidate is judged block by block
    and drift between minutes cancels. Without a fixed ``runs`` (or with --until-decided,
    --budget), blocks are added at looks fixed from the pilot to the cap until the verdict
    decides or the stated cap (--max-repeats, --budget) is reached
    (vgpu.results.verdict.sequential); a capacity search's workload too, from a pilot of at least
    3 repeats to its own cap (vgpu.bench.capacity_plan), each block's searches starting
    where the last ones found the capacity. The block count is even (complete ABBA pairs), and
    each side first runs one warm-up run that is not judged (the session's first runs are
    cold). Offline sides share one expected QPS per instance position (the larger probe),
    so their queries have the same size. A block other load disturbed is set aside and
    run again (vgpu.bench.setaside), at most MAX_REPLACED_BLOCKS times."""
    listen: BenchListener = listener or QuietListener()
    ref_workloads, _ = inference_workloads(reference.scenario, workload_names)
    cand_workloads, notes = inference_workloads(candidate.scenario, workload_names)
    outcomes = (BenchOutcome(reference.scenario, reference.targets, list(reference.notes)),
                BenchOutcome(candidate.scenario, candidate.targets, [*candidate.notes, *notes]))
    repeats = runs or candidate.scenario.repeats
    repeats += repeats % 2  # complete ABBA pairs
    budget = Budget.of(candidate.overrides, len(cand_workloads))
    listen.phase(job_outline(
        {w.label: planned_looks(candidate, w, repeats, runs is None) for w in cand_workloads},
        _run_rule(candidate, cand_workloads)))
    for cand_w in cand_workloads:
        ref_w = next(w for w in ref_workloads if w.label == cand_w.label)
        pair = (_side_outcome(reference, ref_w), _side_outcome(candidate, cand_w))
        for mine, other, role in ((pair[0], pair[1], "reference"),
                                  (pair[1], pair[0], "candidate")):
            mine.design = {"partner": other.series_id, "order": "ABBA", "role": role}
        outcomes[0].workloads.append(pair[0])
        outcomes[1].workloads.append(pair[1])
        _run_blocks(store, (reference, candidate), pair, repeats, listen, timeouts, budget,
                    sequential=runs is None,
                    family=candidate.overrides.family or len(cand_workloads))
        for result in pair:
            if store.runs(series_id=result.series_id, status="ok"):
                result.series = load_series(store, result.series_id)
                result.server_split = series_split(store, result.series)
        if pair[0].failure or pair[1].failure:
            break
    for outcome in outcomes:
        judge_workloads(store, outcome)
    return outcomes


def _side_outcome(side: Side, workload: InferenceWorkload) -> WorkloadOutcome:
    return WorkloadOutcome(workload=side.effective(workload),
                           series_id=uuid.uuid4().hex)


def _run_blocks(store: ResultStore, sides: tuple[Side, Side],
                pair: tuple[WorkloadOutcome, WorkloadOutcome], repeats: int,
                listen: BenchListener, timeouts: RoundTimeouts, budget: Budget | None,
                sequential: bool, family: int = 1) -> None:
    for index, (side, result) in enumerate(zip(sides, pair, strict=True)):
        effective = result.workload
        if effective.scenario == "Offline" and effective.target_qps is None and \
                not calibrate(store, side.targets, result, side.overrides, listen, timeouts):
            pair[1 - index].failure = f"stopped with scenario {side.scenario.id}"
            return
    _share_rates(sides, pair)
    _share_length(pair)
    warm_s: list[float] = []
    warmed: dict[int, Sequence[InstanceOutcome]] = {}
    for index, (side, result) in enumerate(zip(sides, pair, strict=True)):
        began = time.monotonic()
        kept: list[InstanceOutcome] = []
        if not warm_up(store, side, result, listen, timeouts, kept):
            pair[1 - index].failure = f"stopped with scenario {side.scenario.id}"
            return
        warm_s.append(time.monotonic() - began)
        warmed[index] = kept
    _share_rates(sides, pair)
    if pair[1].workload.capacity_search:
        _warm_start(sides, pair, warmed)
    candidate = sides[1]
    searched = pair[1].workload.capacity_search
    if searched and sequential:
        repeats = max(repeats, PILOT_BLOCKS)
    pacing = pacing_for(candidate.overrides, repeats, budget, step=2, always=sequential,
                        default_cap=CAPACITY_MAX_BLOCKS if searched else None, family=family)
    if searched:
        planned = (repeats,) if pacing is None else \
            schedule(repeats, pacing.design.max_repeats, pacing.design)
        stated = plan_note(pair[1].workload, planned)
        pair[1].workload.notes.append(stated)
        listen.phase(f"{pair[1].workload.label}: {stated}")
    elif pacing is not None:
        stated = (f"interleaved blocks: {pacing.design.looks} looks fixed from {repeats} "
                  f"blocks to the cap; at most {pacing.design.max_repeats} blocks "
                  f"({2 * pacing.design.max_repeats} runs) unless decided sooner "
                  "(--max-repeats, --budget)")
        pair[1].workload.notes.append(stated)
        listen.phase(f"{pair[1].workload.label}: {stated}")
    if pacing is not None and family > 1:
        _say(pair, listen, f"a FAIL stops the blocks at this workload's share of the 2.5%, "
             f"{100 * pacing.design.alpha / family:.2f}% (the command judges its {family} "
             "workloads as one family)")
    looks = (schedule(repeats, pacing.design.max_repeats, pacing.design)
             if pacing is not None else (repeats,))
    if pacing is not None:  # fixed before the first run: a stop at the pilot's look is
        # judged at that look's level, as the look judged it
        pair[1].design = {**(pair[1].design or {}), "looks": ",".join(map(str, looks))}
    run = ("one capacity search per instance" if searched
           else f"one {pair[1].workload.duration_s:g} s run")
    plan = plan_blocks(pair[1].workload.label, looks, warm_s, run, MAX_REPLACED_BLOCKS)
    _say(pair, listen, plan.describe())
    started = time.monotonic()
    try:
        _blocks(store, sides, pair, (repeats, pacing), listen, timeouts)
    finally:
        spent = time.monotonic() - started
        blocks = len(pair[1].run_ids)
        _say(pair, listen, plan.kept(blocks, spent))


def _say(pair: tuple[WorkloadOutcome, WorkloadOutcome], listen: BenchListener,
         text: str) -> None:
    pair[1].workload.notes.append(text)
    listen.phase(f"{pair[1].workload.label}: {text}")


def planned_looks(candidate: Side, workload: InferenceWorkload, repeats: int,
                  sequential: bool) -> tuple[int, ...]:
    """The block totals a candidate workload is looked at (one: a fixed --runs)."""
    searched = candidate.effective(workload).capacity_search
    if searched and sequential:
        repeats = max(repeats, PILOT_BLOCKS)
    pacing = pacing_for(candidate.overrides, repeats, None, step=2, always=sequential,
                        default_cap=CAPACITY_MAX_BLOCKS if searched else None)
    if pacing is None:
        return (repeats,)
    return schedule(repeats, pacing.design.max_repeats, pacing.design)


def _run_rule(candidate: Side, workloads: Sequence[InferenceWorkload]) -> str:
    effective = [candidate.effective(w) for w in workloads]
    lengths = {e.duration_s for e in effective}
    if any(e.sized_by_stability for e in effective):
        return ("a run lasts what the probe's rate stability needs (10-120 s, a GPU's "
                "rule; --mlperf-rules: 600 s)")
    return f"a run lasts {', '.join(f'{d:g}' for d in sorted(lengths))} s"


def _blocks(store: ResultStore, sides: tuple[Side, Side],
            pair: tuple[WorkloadOutcome, WorkloadOutcome],
            design: tuple[int, Pacing | None], listen: BenchListener,
            timeouts: RoundTimeouts) -> None:
    repeats, pacing = design
    candidate = sides[1]
    searched = pair[1].workload.capacity_search
    total, block, started = repeats, 0, time.monotonic()
    disturbed = DisturbedBlocks()
    while block < total:
        order = (0, 1) if block % 2 == 0 else (1, 0)
        run_ids: list[int] = []
        sides_run: list[int] = []
        outcomes: dict[int, Sequence[InstanceOutcome]] = {}
        for index in order:
            side, result = sides[index], pair[index]
            listen.phase(f"{result.workload.label}: block {block + 1}/{total}, scenario "
                         f"{side.scenario.id}")
            ran = run_repeat(store, side.scenario, side.targets, result, block, total,
                              side.overrides, listen, timeouts)
            if ran is None:
                pair[1 - index].failure = f"stopped with scenario {side.scenario.id}"
                return
            run_ids += result.run_ids[-1:]  # the run this repeat stored
            sides_run.append(index)
            outcomes[index] = ran
            if result.calibrated_qps:
                recalibrate(result, ran)
        _share_rates(sides, pair)
        step = _after_block(store, disturbed, block, (run_ids, sides_run), pair, listen,
                            (f"scenario {sides[0].scenario.id}",
                             f"scenario {sides[1].scenario.id}"))
        if step == "again":
            continue  # the next searches start where the last undisturbed block's did
        if step == "stop":
            return  # disturbed again after the last replacement: INCONCLUSIVE, named
        if searched:
            _warm_start(sides, pair, outcomes)
        block += 1
        if block == total and pacing is not None:
            total = pacing.next_total(store, candidate.scenario, pair[1], total,
                                      time.monotonic() - started, listen)


def _after_block(store: ResultStore, disturbed: DisturbedBlocks, block: int,
                 runs: tuple[list[int], list[int]],
                 pair: tuple[WorkloadOutcome, WorkloadOutcome], listen: BenchListener,
                 names: tuple[str, str]) -> Literal["next", "again", "stop"]:
    """"next" when no other load disturbed the block's runs; "again" when they were set
    aside and the block is to run again; "stop" when they were disturbed once the
    replacements were spent (they stay: the verdict is INCONCLUSIVE, naming them)."""
    run_ids, sides = runs
    found = disturbed.check(store, run_ids)
    if not found:
        return "next"
    note = disturbed.set_aside(store, block, run_ids, found, sides, names)
    step: Literal["again", "stop"] = "again"
    if note is None:
        note, step = disturbed.exhausted(block, found), "stop"
    for result in pair:
        result.workload.notes.append(note)
    listen.phase(f"{pair[1].workload.label}: {note}")
    return step


def warm_up(store: ResultStore, side: Side, result: WorkloadOutcome, listen: BenchListener,
            timeouts: RoundTimeouts, kept: list[InstanceOutcome] | None = None) -> bool:
    """One run of ``result``'s workload on ``side`` before the judged blocks, not stored
    as a run (its logs under logs/warmup/): a session's first run is cold (caches, clocks,
    lazy initialisation) and would fall into one block only. False, with
    ``result.failure`` set, when it failed; its instance outcomes go to ``kept``."""
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
        recalibrate(result, warm.outcomes)
    if kept is not None:
        kept += warm.outcomes
    return True


def _share_length(pair: tuple[WorkloadOutcome, WorkloadOutcome]) -> None:
    """Runs sized by each side's probe (a GPU's rule) last as long on both sides: the
    longer of the two, so neither side's rate is read over a different span."""
    ref, cand = (result.workload for result in pair)
    if not (ref.sized_by_stability and cand.sized_by_stability) or \
            ref.duration_s == cand.duration_s:
        return
    longer = max(ref.duration_s, cand.duration_s)
    for workload in (ref, cand):
        if workload.duration_s != longer:
            workload.notes.append(f"run length {workload.duration_s:g} s -> {longer:g} s: "
                                  "both sides run the longer of their probes' lengths")
            workload.duration_s = longer


def _warm_start(sides: tuple[Side, Side], pair: tuple[WorkloadOutcome, WorkloadOutcome],
                ran: dict[int, Sequence[InstanceOutcome]]) -> None:
    """The next capacity searches of both sides start where the ones just run found the
    capacity (vgpu.bench.capacity_plan.warm_starts), position by position."""
    if len(ran) < 2 or len(sides[0].targets) != len(sides[1].targets):
        return
    found = []
    for index, side in enumerate(sides):
        searches = {o.target.instance: o.result.capacity for o in ran[index]}
        found.append([(t.instance, searches.get(t.instance)) for t in side.targets])
    starts = warm_starts(found)
    for result in pair:
        result.capacity_start.update(starts)


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
