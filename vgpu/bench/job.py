"""One benchmark job as `vgpu bench` and `vgpu revalidate` run it: connect to a scenario's
targets (this machine, or an inventory's VMs / bare-metal hosts), run its bare-metal twin
first when the store has none to judge against, then the scenario itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from vgpu.bench.interleave import Side, run_interleaved
from vgpu.bench.judging import judge_as_family
from vgpu.bench.outcome import BenchListener, BenchOutcome
from vgpu.bench.session import inference_workloads, run_bench
from vgpu.bench.triton import TritonSetup
from vgpu.bench.twin import plan_twin
from vgpu.bench.workload import BenchOverrides, effective_workload
from vgpu.errors import RemoteError
from vgpu.model.scenario import Scenario
from vgpu.remote.targets import ConnectOptions
from vgpu.results.store.result_store import ResultStore
from vgpu.site import Site
from vgpu.targets.connect import HostTargetHook
from vgpu.targets.prepared import Prepared, TargetRequest, prepare_targets
from vgpu.targets.runtime import RuntimeOptions


@dataclass(frozen=True)
class BenchRequest:
    """What a benchmark job was asked, checked, and the site it runs on (an empty Site:
    this machine). ``host_target_hook`` and ``connect`` let a caller reach the inventory's
    hosts some other way (the SSH lab of the tests)."""

    site: Site
    runs: int | None
    workloads: list[str] | None
    overrides: BenchOverrides
    allow_cpu: bool
    runtime: RuntimeOptions
    triton_image: str | None = None
    host_target_hook: HostTargetHook | None = None
    connect: ConnectOptions = field(default_factory=ConnectOptions)

    @property
    def targets(self) -> TargetRequest:
        return TargetRequest(self.site, self.runtime, self.allow_cpu,
                             self.overrides.simulated_gpu, self.overrides.max_clock_offset_ms,
                             self.host_target_hook, self.connect)


class JobListener(BenchListener, Protocol):
    """What a job tells its caller beside each round's progress: which baseline runs first
    and how (``note``), and the baseline's outcome once it ran (``baseline_ran``)."""

    def note(self, text: str) -> None: ...

    def baseline_ran(self, outcome: BenchOutcome, db: str) -> None: ...


def run_prepared(prepared: Prepared, request: BenchRequest, store: ResultStore,
                 listener: BenchListener) -> BenchOutcome:
    sc = prepared.scenario
    triton = TritonSetup(image=request.triton_image or sc.guest.triton_image,
                         cli=prepared.cli)
    return run_bench(sc, prepared.targets, prepared.notes, store, runs=request.runs,
                     overrides=request.overrides, workload_names=request.workloads,
                     listener=listener, triton=triton)


def run_scenario(sc: Scenario, request: BenchRequest, store: ResultStore,
                 listener: BenchListener) -> BenchOutcome:
    prepared = prepare_targets(sc, request.targets, store.logs_root)
    try:
        return run_prepared(prepared, request, store, listener)
    finally:
        prepared.close()


def stored_keys(prepared: Prepared, request: BenchRequest) -> dict[str, str]:
    """Chosen workload label -> the key its series will be stored under on these targets
    (what a stored twin must match to be judged against)."""
    chosen, _ = inference_workloads(prepared.scenario, request.workloads)
    return {w.label: effective_workload(w, prepared.on_cpu, request.overrides).key
            for w in chosen}


@dataclass(frozen=True)
class TwinChoice:
    """--with-baseline (force) / --no-baseline (skip) / neither (run it when missing)."""

    force: bool = False
    skip: bool = False


def bench_with_twin(sc: Scenario, request: BenchRequest, store: ResultStore, *,
                    twin: TwinChoice, listener: JobListener) -> BenchOutcome:
    """The scenario's bare-metal twin first when needed (on the same targets and
    settings), then the scenario, judged against it; its workloads' verdicts are one
    family (vgpu.results.verdict.judge.judged_as_one_family)."""
    outcome = _twin_then_scenario(sc, request, store, twin=twin, listener=listener)
    judge_as_family(store, outcome)
    return outcome


def family_size(scenarios: Sequence[Scenario], workloads: list[str] | None) -> int:
    """How many workload comparisons judging ``scenarios`` makes (one family)."""
    return sum(len(inference_workloads(sc, workloads)[0]) for sc in scenarios)


def _twin_then_scenario(sc: Scenario, request: BenchRequest, store: ResultStore, *,
                        twin: TwinChoice, listener: JobListener) -> BenchOutcome:
    if request.overrides.family is None:  # the interleaved part and the rest: one family
        request = replace(request, overrides=replace(
            request.overrides, family=family_size([sc], request.workloads)))
    prepared = prepare_targets(sc, request.targets, store.logs_root)
    try:
        plan = plan_twin(sc, stored_keys(prepared, request), store, force=twin.force,
                         skip=twin.skip, inventory=request.site.inventory)
        if plan.note:
            listener.note(plan.note)
        if plan.scenario is None:
            return run_prepared(prepared, request, store, listener)
        if _interleavable(prepared, request):
            return _interleaved(plan.scenario, plan.workloads, prepared, request, store,
                                listener)
        twin_request = replace(request, workloads=plan.workloads,
                               overrides=replace(request.overrides, slowdown=0.0),
                               runtime=_own_image(request.runtime))
        _run_twin(plan.scenario, twin_request, store, listener)
        return run_prepared(prepared, request, store, listener)
    finally:
        prepared.close()


def _own_image(runtime: RuntimeOptions) -> RuntimeOptions:
    """The twin's runtime: its hosts' own harness image, never one held for the guests."""
    return replace(runtime, held=None)


def _interleavable(prepared: Prepared, request: BenchRequest) -> bool:
    """Candidate and twin alternate block by block unless a workload deploys its own
    Triton server (one per series)."""
    chosen, _ = inference_workloads(prepared.scenario, request.workloads)
    return not any(effective_workload(w, prepared.on_cpu, request.overrides).deploys_triton
                   for w in chosen)


def _interleaved(twin: Scenario, workloads: list[str], prepared: Prepared,
                 request: BenchRequest, store: ResultStore,
                 listener: JobListener) -> BenchOutcome:
    """The twin's missing workloads interleaved with the scenario's (ABBA blocks on the
    same targets), then the scenario's other workloads on their own."""
    listener.note(f"[bold]Interleaved with its baseline:[/] scenario {twin.id} ({twin.name}) and "
              f"scenario {prepared.scenario.id} alternate block by block (ABBA)")
    twin_request = replace(request, workloads=workloads,
                           overrides=replace(request.overrides, slowdown=0.0),
                           runtime=_own_image(request.runtime))
    twin_prepared = prepare_targets(twin, twin_request.targets, store.logs_root)
    try:
        twin_outcome, outcome = run_interleaved(
            Side(twin, twin_prepared.targets, twin_prepared.notes, twin_request.overrides),
            Side(prepared.scenario, prepared.targets, prepared.notes, request.overrides),
            store, runs=request.runs, workload_names=workloads,
            listener=listener)
    finally:
        twin_prepared.close()
    listener.baseline_ran(twin_outcome, str(store.path))
    chosen, _ = inference_workloads(prepared.scenario, request.workloads)
    rest = [w.label for w in chosen if w.label not in workloads]
    if rest and not outcome.failure:
        more = run_prepared(prepared, replace(request, workloads=rest), store, listener)
        outcome.workloads += more.workloads
    return outcome


def _run_twin(base: Scenario, request: BenchRequest, store: ResultStore,
              listener: JobListener) -> None:
    listener.note(f"[bold]Baseline first:[/] scenario {base.id} ({base.name})")
    outcome = run_scenario(base, request, store, listener)
    listener.baseline_ran(outcome, str(store.path))
    if outcome.failure:
        raise RemoteError(f"baseline scenario {base.id}: {outcome.failure}")
