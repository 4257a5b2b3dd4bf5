"""`vgpu bench`: every inference workload of a scenario, repeated, on every target at once;
each repeat stored as a run; statistics and the verdict against the scenario's baseline."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from vgpu.bench.calibrate import HEADROOM, probe_offline
from vgpu.bench.collect import instance_result, server_split_metrics
from vgpu.bench.disturbance import disturbance_metrics
from vgpu.bench.fanout import InstanceOutcome, RoundTimeouts, run_round
from vgpu.bench.judging import judge_workloads
from vgpu.bench.outcome import BenchListener, BenchOutcome, QuietListener, WorkloadOutcome
from vgpu.bench.overlap import overlap_metrics, round_overlap, stability_metrics
from vgpu.bench.pacing import Budget, Pacing, pacing_for
from vgpu.bench.provenance import scenario_revision
from vgpu.bench.runlength import gpu_run_seconds
from vgpu.bench.triton import TritonSetup, deployed
from vgpu.bench.workload import BenchOverrides, EffectiveWorkload, effective_workload, harness_spec
from vgpu.errors import RemoteError
from vgpu.model.scenario import InferenceWorkload, Scenario
from vgpu.results.store.records import Metric, RunStart
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import load_series
from vgpu.results.store.tokens import outcome_results, token_metrics
from vgpu.results.views.format import number
from vgpu.results.views.server_split import series_split
from vgpu.targets.clock import clock_metrics
from vgpu.targets.target import Target


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
    """Run and store each workload's series, then judge each once. Stops at the first
    failed repeat; Ctrl-C stops every
    instance, stores the run as aborted and re-raises KeyboardInterrupt. A Triton
    workload without ``overrides.triton_url`` gets a server per host for its rounds
    (``triton``, default: the scenario's guest.triton_image), removed afterwards."""
    listen: BenchListener = listener or QuietListener()
    workloads, notes = inference_workloads(scenario, workload_names)
    outcome = BenchOutcome(scenario=scenario, targets=targets, notes=[*target_notes, *notes])
    on_cpu = all(t.device.get("kind") == "cpu" for t in targets)
    repeats = runs or scenario.repeats
    budget = Budget.of(overrides, len(workloads))
    for workload in workloads:
        effective = effective_workload(workload, on_cpu, overrides)
        if (effective.min_valid or 0) > repeats:
            effective.notes.append(f"min_valid {effective.min_valid} is more than the "
                                   f"{repeats} repeats: every repeat must be VALID")
        result = WorkloadOutcome(workload=effective, series_id=uuid.uuid4().hex)
        outcome.workloads.append(result)
        series = partial(_run_series, store, scenario, targets, result, repeats, overrides,
                         listen, timeouts,
                         pacing_for(overrides, repeats, budget,
                                    family=overrides.family or len(workloads)))
        if effective.deploys_triton:
            _with_triton(series, targets, result, listen, store.logs_root / "triton",
                         triton or TritonSetup(image=scenario.guest.triton_image))
        else:
            series()
        if store.runs(series_id=result.series_id, status="ok"):
            result.series = load_series(store, result.series_id)
            result.server_split = series_split(store, result.series)
        if result.failure:
            break
    judge_workloads(store, outcome)
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
    pacing: Pacing | None = None,
) -> None:
    effective = result.workload
    offline_unknown = effective.scenario == "Offline" and effective.target_qps is None
    if offline_unknown and not calibrate(store, targets, result, overrides, listen, timeouts):
        return
    total, repeat, started = repeats, 0, time.monotonic()
    while repeat < total:
        listen.phase(f"{effective.label}: repeat {repeat + 1}/{total}")
        outcomes = run_repeat(store, scenario, targets, result, repeat, total, overrides,
                               listen, timeouts)
        if outcomes is None:
            return
        repeat += 1
        if repeat == total and pacing is not None:
            total = pacing.next_total(store, scenario, result, total,
                                      time.monotonic() - started, listen)
        if result.calibrated_qps and repeat < total:
            recalibrate(result, outcomes)


def calibrate(
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
        probe = probe_offline(
            targets, effective, lambda n, inst: probe_root / f"probe-{n}" / inst,
            listen, timeouts, seed=overrides.seed,
        )
    except RemoteError as exc:
        result.failure = str(exc)
        return False
    finally:
        listen.end_round()
    result.calibrated_qps = probe.expected_qps
    rates = ", ".join(f"{k} {number(v)}/s" for k, v in result.calibrated_qps.items())
    effective.notes.append(f"Offline expected QPS from a probe round (x{probe.headroom:g}): "
                           f"{rates}")
    if effective.sized_by_stability:
        length = gpu_run_seconds(probe.results,
                                 effective.duration_upper_s or effective.duration_s)
        effective.duration_s = length.seconds
        effective.notes.append(f"GPU run length {length.seconds:g} s: {length.reason}")
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


def run_repeat(
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
            repeat=repeat, start_qps=result.capacity_start.get(t.instance),
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
                 *token_metrics(outcome_results(round_result.outcomes))],
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
    results = outcome_results(outcomes)
    return [*(m for name, result in results.items() for m in stability_metrics(name, result)),
            *overlap_metrics(round_overlap(results))]


def recalibrate(result: WorkloadOutcome, outcomes: Sequence[InstanceOutcome]) -> None:
    """An Offline run that ended before its min duration was expected too few samples:
    the next repeats expect the rate this run measured."""
    for outcome in outcomes:
        validity, rate = outcome.result.validity, outcome.result.throughput
        if validity is not None and validity.min_duration_met is False and rate:
            name = outcome.target.instance
            result.calibrated_qps[name] = rate * HEADROOM
            result.workload.notes.append(
                f"{name} finished before the min duration: expected QPS raised to "
                f"{number(result.calibrated_qps[name])}/s for the next repeats")
