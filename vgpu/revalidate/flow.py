"""The revalidation itself, scenario by scenario: converge (apply + provision), bench with
the bare-metal twin, judge against bare metal and the named pre-upgrade baseline. Progress
is saved after every scenario; a scenario that cannot run is recorded with its reason and
the others go on."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from rich.console import Console

from vgpu.bench.job import BenchRequest, TwinChoice, bench_with_twin, family_size
from vgpu.bench.outcome import BenchOutcome
from vgpu.bench.progress import CommandListener
from vgpu.bench.summary import render
from vgpu.container.images import HeldImage
from vgpu.defaults import DEFAULT_BASELINE
from vgpu.errors import InputError, VgpuError
from vgpu.exitcodes import EXIT_PASS
from vgpu.model.inventory import Inventory
from vgpu.model.scenario import Scenario
from vgpu.model.yamlsource import load_yaml
from vgpu.results.stats.noise import FROM_BASELINE, NoiseLevels
from vgpu.results.store.records import BaselineSet
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SeriesData, load_series
from vgpu.results.verdict.accuracy import ACCURACY_REFERENCE, accuracy_check
from vgpu.results.verdict.calibration import compare_calibrated, parse_references
from vgpu.results.verdict.compare import Comparison, ComparisonKind
from vgpu.results.verdict.judge import compare_series, judge_against_baseline, judged_as_one_family
from vgpu.results.verdict.noise_store import levels_against, levels_for
from vgpu.results.verdict.referee import against_named_baseline, throughput_tolerance
from vgpu.revalidate import state as saved
from vgpu.revalidate.capture import CapturePlan, record_spread
from vgpu.revalidate.hosts import BaselineChoice
from vgpu.revalidate.image import baseline_image, refuse_unrunnable, verdict_image_notes
from vgpu.revalidate.preflight import HostPin, PreflightPhase, run_preflight_phase
from vgpu.revalidate.verdicts import WorkloadVerdict, exit_code, overall

# The scenario, the host pinned, the harness image held fixed (None: made as planned).
Converge = Callable[[Scenario, str | None, HeldImage | None], None]


def baseline_key(name: str, scenario_id: str, workload: str) -> str:
    """The stored baseline name of one scenario's workload in a named baseline set."""
    return f"{name}:{scenario_id}:{workload}"


@dataclass(frozen=True)
class RevalidateRequest:
    inventory: Inventory
    inventory_path: Path
    scenarios: Sequence[Scenario]
    bench: BenchRequest
    facts_dir: Path
    state_dir: Path
    baseline: str = DEFAULT_BASELINE
    capture_baseline: bool = False
    resume: bool = False
    references: Path | None = None  # `vgpu baseline calibrate`: used where no baseline is
    choice: BaselineChoice | None = None  # the sets recorded and judged (default: baseline)
    rebuild_image: bool = False  # False: each scenario runs its baseline's harness image
    # with capture_baseline: series and their spacing
    capture: CapturePlan = field(default_factory=CapturePlan)
    # the state file's name (a campaign's, per host and phase): kept, finished or not, and
    # continued by the next run of that name, so no finished scenario is run twice
    state_name: str | None = None

    @property
    def sets(self) -> BaselineChoice:
        return self.choice or BaselineChoice(self.baseline, self.baseline)

    @property
    def host(self) -> str | None:
        """The ESXi host every VM is pinned to (--host), or None."""
        return self.sets.host


@dataclass
class RevalidateOutcome:
    state: saved.Revalidation
    verdicts: list[WorkloadVerdict] = field(default_factory=list)
    could_not_run: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    host_uuid: str | None = None  # the pinned host's hardware UUID, as read now
    host: str | None = None  # the host every VM was pinned to (--host)
    # --host without --capture-baseline: judged against the host's own baseline or not at
    # all (bare metal alone never passes an upgraded host)
    needs_baseline: bool = False
    capture: bool = False  # --capture-baseline: this run is the reference

    @property
    def drift(self) -> dict[str, Any] | None:
        return self.state.drift

    @property
    def verdict(self) -> str | None:
        """The revalidation's one verdict; None when nothing was judged."""
        return overall(self.verdicts, self.needs_baseline)

    @property
    def exit_code(self) -> int:
        """vgpu.exitcodes; a capture with nothing to judge it against (it is the
        reference) exits 0 once recorded."""
        if self.capture and not self.could_not_run and self.verdict is None:
            return EXIT_PASS
        return exit_code(self.verdicts, self.could_not_run, self.needs_baseline)

    @property
    def comparisons(self) -> list[Comparison]:
        return [c for v in self.verdicts for c in v.comparisons]


def revalidate(request: RevalidateRequest, store: ResultStore, console: Console,
               converge: Converge) -> RevalidateOutcome:
    held = held_images(request, store)
    state = _state(request)
    outcome = RevalidateOutcome(state, host=request.host,
                                needs_baseline=request.host is not None
                                and not request.capture_baseline,
                                capture=request.capture_baseline)
    recorded = store.baseline_set(request.sets.judged)
    blockers = _preflight(request, state, outcome, console, recorded)
    for sc in request.scenarios:
        progress = state.progress(sc.id)
        if progress.status != "done":
            _run_one(sc, request, store, console, converge, blockers.get(sc.id), progress,
                     held.get(sc.id))
            state.save()
        if progress.status == "done":
            outcome.verdicts += _judge(store, sc, progress.series, request)
        else:
            outcome.could_not_run[sc.id] = progress.reason or "unknown"
    outcome.verdicts = against_bare_metal_as_one_family(store, outcome.verdicts)
    state.finished = not outcome.could_not_run
    state.save()
    if request.capture_baseline and any(p.status == "done" for p in state.scenarios):
        store.put_baseline_set(BaselineSet(
            request.sets.recorded, request.host, outcome.host_uuid, state.preflight_id,
            time.time()))
    return outcome


def held_images(request: RevalidateRequest, store: ResultStore) -> dict[str, HeldImage]:
    """Per scenario, the harness image its baseline ran, which this run holds fixed (none
    when capturing a baseline or asked to rebuild it); InputError, before anything changes,
    where the new guest driver cannot run one."""
    if request.capture_baseline or request.rebuild_image:
        return {}
    found = [image for sc in request.scenarios if sc.platform == "vsphere"
             and (image := baseline_image(store, request.sets.judged, sc.id)) is not None]
    refuse_unrunnable(found, request.inventory.drivers.guest_version(),
                      str(request.inventory_path))
    return {image.scenario_id: image.image for image in found}


def _state(request: RevalidateRequest) -> saved.Revalidation:
    ids = [sc.id for sc in request.scenarios]
    key = saved.RunKey(host=request.host, recorded=request.sets.recorded,
                       judged=request.sets.judged, capture=request.capture_baseline,
                       workloads=sorted(request.bench.workloads or []))
    if request.state_name is not None:
        kept = saved.named(request.state_dir, request.state_name)
        if kept is not None:
            saved.refuse_other_run(kept, key)
            return kept
        return saved.start(request.state_dir, request.inventory_path, request.baseline, ids,
                           key, request.state_name)
    if request.resume:
        found = saved.unfinished(request.state_dir, request.inventory_path)
        if found is not None:
            saved.refuse_other_run(found, key)
            if [p.scenario_id for p in found.scenarios] == ids:
                return found
    return saved.start(request.state_dir, request.inventory_path, request.baseline, ids, key)


def _preflight(request: RevalidateRequest, state: saved.Revalidation,
               outcome: RevalidateOutcome, console: Console,
               recorded: BaselineSet | None) -> dict[str, str]:
    pending = [sc for sc in request.scenarios if state.progress(sc.id).status != "done"]
    if state.preflight_id is not None and not pending:
        return {}
    before = None if request.capture_baseline or recorded is None else recorded
    phase: PreflightPhase = run_preflight_phase(
        request.inventory, request.inventory_path, pending, request.facts_dir, console,
        HostPin(request.host, request.sets.across_hosts,
                before.pre_upgrade_facts_id if before else None,
                before.hardware_uuid if before else None, request.sets.judged))
    if state.preflight_id is None:  # a resumed run keeps the drift it first measured
        state.drift, state.preflight_id = phase.drift, phase.facts_id
        state.save()
    outcome.notes += phase.notes
    outcome.host_uuid = phase.host_uuid
    return phase.blockers


def _run_one(sc: Scenario, request: RevalidateRequest, store: ResultStore, console: Console,
             converge: Converge, blocker: str | None, progress: saved.ScenarioProgress,
             held: HeldImage | None) -> None:
    if blocker is not None:
        progress.status, progress.reason = "could-not-run", blocker
        return
    count = request.capture.series if request.capture_baseline else 1
    benches: list[BenchOutcome] = []
    try:
        console.print(f"[bold]Scenario {sc.id} ({sc.name})[/]")
        if held is not None:
            console.print(f"harness image held fixed: the baseline's {held.reference} "
                          f"({held.image_id})", highlight=False)
        converge(sc, request.host, held)
        # every scenario's verdicts against bare metal are one family: each series' looks
        # stop on a FAIL only at its share of it (against_bare_metal_as_one_family)
        family = family_size(request.scenarios, request.bench.workloads)
        bench_request = replace(request.bench,
                                runtime=replace(request.bench.runtime, held=held),
                                overrides=replace(request.bench.overrides, family=family))
        started = time.monotonic()
        for index in range(count):
            if index:
                _pause_between_series(request.capture, index, count, started, console)
            bench = bench_with_twin(sc, bench_request, store, twin=TwinChoice(),
                                    listener=CommandListener(console))
            render(bench, console, str(store.path), None)
            benches.append(bench)
            if bench.failure:
                break
    except VgpuError as exc:
        progress.status, progress.reason = "could-not-run", str(exc)
        return
    bench = benches[-1]
    progress.series = {w.workload.label: w.series_id for w in bench.workloads
                       if w.series is not None}
    if bench.failure:
        progress.status, progress.reason = "could-not-run", bench.failure
        return
    if request.capture_baseline:
        record_spread(store, benches, console)
        for label, series_id in progress.series.items():
            run = store.runs(series_id=series_id, status="ok")[0]
            store.set_baseline(run.id, baseline_key(request.sets.recorded, sc.id, label))
    progress.status, progress.reason = "done", None


def _pause_between_series(plan: CapturePlan, index: int, count: int, started: float,
                          console: Console) -> None:
    per_series = (time.monotonic() - started - (index - 1) * plan.pause_s) / index
    left = (count - index) * per_series + (count - index) * plan.pause_s
    console.print(f"baseline series {index + 1}/{count} in {plan.pause_s:.0f} s (one series "
                  f"took about {per_series:.0f} s: about {left:.0f} s left for this "
                  "scenario)", highlight=False)
    time.sleep(plan.pause_s)


def _judge(store: ResultStore, sc: Scenario, series: dict[str, str],
           request: RevalidateRequest) -> list[WorkloadVerdict]:
    verdicts = []
    for label, series_id in series.items():
        data = load_series(store, series_id)
        vs_bare_metal, note = judge_against_baseline(store, sc, data, "vgpu revalidate")
        if vs_bare_metal is not None and vs_bare_metal.reference == ACCURACY_REFERENCE:
            vs_bare_metal = None  # the gate alone: shown in its own column
        notes = [] if vs_bare_metal is not None else [f"no bare-metal verdict: {note}"]
        judged = request.sets.judged
        named = store.baseline(baseline_key(judged, sc.id, label))
        vs_baseline = None
        if named is None and request.references is not None:
            vs_baseline = _against_references(data, sc, request.references, notes,
                                              levels_for(store, data))
        elif named is None:
            notes.append(f"no baseline '{judged}' stored for it")
        elif named.series_id == series_id:
            notes.append(f"this run is baseline '{judged}'")
        else:
            notes += verdict_image_notes(store, named.run_id, series_id)
            chosen = against_named_baseline(sc, data, named)
            reference = load_series(store, chosen.reference_series)
            levels = levels_against(store, data, reference)
            if levels.origin == FROM_BASELINE:
                notes.append(f"against baseline '{judged}': judged with the "
                             f"{levels.judged_by}")
            else:
                notes.append(f"baseline '{judged}' stored no spread of its own (captured "
                             "from one series, or before baselines stored one): judged "
                             f"with the {levels.judged_by}")
            vs_baseline = compare_series(
                cast(ComparisonKind, chosen.kind), data, reference,
                tolerance=chosen.tolerance, tolerances=chosen.tolerances, levels=levels)
            vs_baseline = _same_host_only(vs_baseline, request, judged, notes)
        verdicts.append(WorkloadVerdict(sc.id, label, series_id, vs_bare_metal, vs_baseline,
                                        accuracy_check(data), tuple(notes)))
    return verdicts


def against_bare_metal_as_one_family(store: ResultStore, verdicts: list[WorkloadVerdict]
                                     ) -> list[WorkloadVerdict]:
    """The verdicts against bare metal of every scenario and workload the revalidation
    judged, as one family (vgpu.results.verdict.judge.judged_as_one_family, stored, so a later
    `vgpu report` judges them alike); those against the pre-upgrade baseline stay each
    its own."""
    judged = [v for v in verdicts if v.series_id and v.vs_bare_metal is not None]
    family = judged_as_one_family(store, [(v.series_id, v.vs_bare_metal) for v in judged
                                          if v.series_id and v.vs_bare_metal is not None])
    adjusted = {v.series_id: comparison for v, comparison in zip(judged, family, strict=True)}
    return [replace(v, vs_bare_metal=adjusted.get(v.series_id or "", v.vs_bare_metal))
            for v in verdicts]


def _same_host_only(comparison: Comparison, request: RevalidateRequest, judged: str,
                    notes: list[str]) -> Comparison | None:
    """A baseline measured on another ESXi host is no reference for this one: that
    comparison is dropped (with a note saying how to get one), unless --other-host asked
    for it, when the host stays among its platform changes."""
    moved = next((c for c in comparison.platform_changes if c.field == "host"), None)
    if moved is None or request.sets.across_hosts:
        return comparison
    if request.sets.renamed_from is not None and moved.reference == request.sets.renamed_from:
        notes.append(f"baseline '{judged}' ran on this machine under its former name "
                     f"{moved.reference} (the same hardware UUID)")
        return comparison
    notes.append(f"baseline '{judged}' ran on host {moved.reference or '-'}, this run on "
                 f"{moved.candidate or '-'}: not compared (run with --host "
                 f"{moved.reference}, or judge across hosts with --host "
                 f"{moved.candidate} --other-host {moved.reference})")
    return None


def _against_references(data: SeriesData, sc: Scenario, path: Path,
                        notes: list[str], levels: NoiseLevels) -> Comparison | None:
    """The calibrated reference of the series' host class, when the file has one."""
    references = parse_references(load_yaml(path).data, str(path))
    try:
        return compare_calibrated(data, references, str(path),
                                  throughput_tolerance(sc.tolerances), levels)
    except InputError as exc:
        notes.append(f"no calibrated reference: {exc}")
        return None
