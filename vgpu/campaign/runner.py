"""The gated rolling upgrade, host by host: baseline (captured where missing) -> drain ->
upgrade -> undrain (with the GPU-stack check) -> revalidate --host -> gate. PASS promotes
(the next host); FAIL or a refused step stops the campaign (the host left in a stated state,
the hosts after it untouched); INCONCLUSIVE pauses it for the engineer (`vgpu campaign
continue --accept | --rerun`, or `abort`).

The lab's lease is held over the whole run (renewed; released at the end, on an error and
on Ctrl-C), so no colleague's apply or drain runs inside a host's window. Every phase is
written ``started`` before it changes anything and ``done`` after; a phase found
``started`` on --resume is run again, and each phase looks at the lab first, so that
nothing that changes the lab is done twice and no result is lost (vgpu.campaign.state)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from vgpu import catalog
from vgpu.bench.job import BenchRequest
from vgpu.campaign import state as saved
from vgpu.campaign.gate import gate_verdict, verdict_rows
from vgpu.campaign.model import HOST_PLACEHOLDER, Campaign
from vgpu.campaign.state import DONE, FAILED, CampaignState, HostProgress
from vgpu.errors import RemoteError, VgpuError
from vgpu.exitcodes import (
    EXIT_COULD_NOT_RUN,
    EXIT_FAIL,
    EXIT_INCONCLUSIVE,
    EXIT_NO_REFERENCE,
    EXIT_PASS,
)
from vgpu.model.inventory import Inventory
from vgpu.model.scenario import Scenario
from vgpu.results.store.result_store import ResultStore, store_exists
from vgpu.revalidate.capture import CapturePlan
from vgpu.revalidate.flow import Converge, RevalidateOutcome, RevalidateRequest, revalidate
from vgpu.revalidate.hosts import choose_baseline, scenarios_in_set, set_name, tie_drain_facts
from vgpu.vsphere.apply.window import WindowPaths, drain, undrain
from vgpu.vsphere.desired import drainrecord

Say = Callable[[str], None]
Marker = Callable[[str, str], None]  # (host, text): the campaign's mark on the host


@dataclass(frozen=True)
class CampaignDirs:
    state: Path  # campaign state files
    facts: Path  # preflight facts
    records: Path  # drain records
    revalidations: Path  # revalidation states


@dataclass
class CampaignContext:
    """What the command hands the runner: the lab, where things go, how to talk."""

    campaign: Campaign
    inventory: Inventory
    inventory_path: Path
    bench: BenchRequest  # the site, the runtime; runs, workloads and duration per campaign
    converge: Converge
    db: str
    dirs: CampaignDirs
    say: Say
    console: Any  # rich Console for the revalidations' own output
    mark: Marker = lambda host, text: None
    # shows a host's revalidation (its verdict table, drift and notes) as it ends
    show: Callable[[RevalidateOutcome], None] = lambda outcome: None
    shutdown_timeout_s: float = 120.0
    connect_timeout_s: float = 600.0


FAILPOINT = "VGPU_CAMPAIGN_FAILPOINT"


def failpoint(where: str) -> None:
    """Fault injection for the resume tests: with $VGPU_CAMPAIGN_FAILPOINT set to
    HOST:PHASE, the process kills itself (SIGKILL, as `kill -9` does) once that phase has
    changed the lab and before the state says so: the hardest moment to resume from."""
    if os.environ.get(FAILPOINT) == where:
        os.kill(os.getpid(), signal.SIGKILL)


class Stop(Exception):
    """The campaign stops or pauses here: its status, reason and exit code."""

    def __init__(self, status: str, reason: str, code: int) -> None:
        super().__init__(reason)
        self.status, self.reason, self.code = status, reason, code


def run_campaign(ctx: CampaignContext, state: CampaignState) -> CampaignState:
    """Every host in turn from where the state stands; the state says how it ended."""
    state.status, state.reason, state.exit_code = saved.RUNNING, None, None
    state.save()
    try:
        for host in state.hosts:
            if host.current is None:
                continue
            _one_host(ctx, state, host)
    except Stop as stop:
        state.status, state.reason, state.exit_code = stop.status, stop.reason, stop.code
    else:
        state.status, state.reason, state.exit_code = saved.PASSED, None, EXIT_PASS
        state.ended_at = time.time()
    state.save()
    return state


PhaseRun = Callable[[CampaignContext, CampaignState, HostProgress], str]


def _one_host(ctx: CampaignContext, state: CampaignState, host: HostProgress) -> None:
    steps: list[tuple[str, PhaseRun]] = [
        ("baseline", _baseline), ("drain", _drain), ("upgrade", _upgrade),
        ("undrain", _undrain), ("revalidate", _revalidate), ("gate", _gate)]
    for phase, step in steps:
        if host.phase(phase).status == DONE:
            continue
        _within_budget(ctx, host, phase)
        state.begin(host, phase)
        ctx.mark(host.host, f"campaign {state.name}: {phase}")
        ctx.say(f"[{host.host}] {phase}")
        try:
            detail = step(ctx, state, host)
        except Stop as stop:
            state.end(host, phase, stop.reason, FAILED if stop.code != EXIT_INCONCLUSIVE
                      else saved.STARTED)
            ctx.mark(host.host, f"campaign {state.name}: {phase} {stop.status}")
            raise
        except VgpuError as exc:
            host.left_in = _left_in(ctx, host, phase)
            state.end(host, phase, str(exc), FAILED)
            ctx.mark(host.host, f"campaign {state.name}: {phase} refused")
            raise Stop(saved.STOPPED, f"{host.host}: {phase} refused: {exc}. {host.left_in}",
                       exc.exit_code) from None
        failpoint(f"{host.host}:{phase}")
        state.end(host, phase, detail)
        ctx.say(f"[{host.host}] {phase}: {detail}")
    ctx.mark(host.host, f"campaign {state.name}: {host.verdict or '-'}")


def _within_budget(ctx: CampaignContext, host: HostProgress, phase: str) -> None:
    began = host.phase("drain").started_at
    budget = ctx.campaign.budget_per_host_s
    if began is not None and phase != "gate" and time.time() - began > budget:
        host.left_in = _left_in(ctx, host, phase)
        raise Stop(saved.STOPPED, f"{host.host}: over its budget of {budget:.0f} s before "
                   f"{phase} ({time.time() - began:.0f} s since its drain began). "
                   f"{host.left_in}", EXIT_COULD_NOT_RUN)


def _left_in(ctx: CampaignContext, host: HostProgress, phase: str) -> str:
    """Where a host stands when the campaign stops at ``phase`` (read, never guessed)."""
    record = drainrecord.find(ctx.dirs.records, host.host)
    if record is None or (record.undrained_at is not None and phase in ("baseline",
                                                                         "drain")):
        return f"Host {host.host} was not drained: nothing of it changed."
    if record.undrained_at is None and record.status == drainrecord.DRAINING:
        return (f"Host {host.host}'s drain stopped midway: vgpu's VMs on it shut down "
                f"({', '.join(record.vms_shut_down) or 'none'}), not in maintenance mode; "
                f"`vgpu drain --host {host.host}` finishes it.")
    if record.undrained_at is None:
        return (f"Host {host.host} is in maintenance mode (drained at {record.drained_at}, "
                f"its VMs shut down: {', '.join(record.vms_shut_down) or 'none'}).")
    return (f"Host {host.host} is out of maintenance mode since {record.undrained_at}, "
            "with the scenario's VMs on it: drain it (`vgpu drain --host "
            f"{host.host}`) to keep workloads off it.")


# ---- the phases ------------------------------------------------------------------------

def _baseline(ctx: CampaignContext, state: CampaignState, host: HostProgress) -> str:
    """The host's own baseline of every scenario: kept when it is there, else captured
    now (before anything changes on the host)."""
    name = set_name(ctx.campaign.baseline, host.host)
    if store_exists(ctx.db):
        with ResultStore.open_existing(ctx.db) as store:
            held = scenarios_in_set(store, name)
        if all(catalog.load(s).id in held for s in ctx.campaign.scenarios):
            return f"baseline '{name}' holds scenario(s) {', '.join(held)}"
    outcome = _revalidation(ctx, state, host, capture=True)
    if outcome.could_not_run:
        raise Stop(saved.STOPPED, f"{host.host}: the baseline could not be captured: "
                   + "; ".join(f"{k}: {v}" for k, v in outcome.could_not_run.items())
                   + f". Host {host.host} was not drained.", EXIT_COULD_NOT_RUN)
    return (f"baseline '{name}' captured ({ctx.campaign.baseline_series} series per "
            "scenario)")


def _paths(ctx: CampaignContext) -> WindowPaths:
    return WindowPaths(ctx.dirs.facts, ctx.dirs.records)


def _drain(ctx: CampaignContext, state: CampaignState, host: HostProgress) -> str:
    tie = partial(tie_drain_facts, ctx.db) if store_exists(ctx.db) else None
    record = drain(ctx.inventory, ctx.inventory_path, host.host, _paths(ctx),
                   ctx.shutdown_timeout_s, ctx.say, tie_baselines=tie)
    host.hardware_uuid = record.hardware_uuid
    host.before = {"esxi_build": record.esxi_build, "host_driver": record.host_driver}
    return (f"in maintenance mode; VMs shut down: {', '.join(record.vms_shut_down) or 'none'}"
            f"; left to vSphere: {', '.join(record.system_vms) or 'none'}")


def _upgrade(ctx: CampaignContext, state: CampaignState, host: HostProgress) -> str:
    record = drainrecord.load(ctx.dirs.records, host.host)
    done = _upgraded_since(ctx, record)
    if done is not None:
        return done
    method = ctx.campaign.upgrade.method
    if method == "manual":
        raise Stop(saved.PAUSED, f"upgrade {host.host} now (it is in maintenance mode), then "
                   f"`vgpu campaign continue {state.campaign_file}`", EXIT_INCONCLUSIVE)
    if method == "command":
        return _upgrade_by_command(ctx, host.host)
    return _upgrade_in_sim(ctx, host.host)


def _upgraded_since(ctx: CampaignContext, record: drainrecord.DrainRecord) -> str | None:
    """Said when the host booted into another build or driver since its drain (an upgrade
    done before an interruption is never done twice)."""
    from vgpu.vsphere.connect.connection import connect
    from vgpu.vsphere.connect.from_inventory import placement_from_inventory, target_from_inventory
    from vgpu.vsphere.plan.reconcile import read_state
    from vgpu.vsphere.read.facts import read_host_driver

    with connect(target_from_inventory(ctx.inventory, ctx.inventory_path)) as session:
        facts = read_state(session, placement_from_inventory(
            ctx.inventory, ctx.inventory_path)).hosts.get(record.host)
        if facts is None or facts.connection_state != "connected":
            return None
        read_host_driver(facts)
    driver = f"{facts.host_driver.name} {facts.host_driver.version}" \
        if facts.host_driver else None
    booted = facts.boot_time is not None and record.boot_time is not None \
        and facts.boot_time > record.boot_time
    if booted and (facts.build != record.esxi_build or driver != record.host_driver):
        return (f"upgraded already (booted {facts.boot_time} into ESXi build {facts.build}, "
                f"host driver {driver or '-'})")
    return None


def _upgrade_by_command(ctx: CampaignContext, host: str) -> str:
    template = ctx.campaign.upgrade.command or ""
    line = template.replace(HOST_PLACEHOLDER, shlex.quote(host)) \
        if HOST_PLACEHOLDER in template else f"{template} {shlex.quote(host)}"
    timeout = ctx.campaign.upgrade.timeout_s
    try:
        done = subprocess.run(line, shell=True, capture_output=True, text=True,
                              timeout=timeout, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise RemoteError(f"the upgrade command `{line}` did not end within {timeout:.0f} s; "
                          f"check {host}, then `vgpu campaign run --resume`") from None
    tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
    if done.returncode != 0:
        raise RemoteError(f"the upgrade command `{line}` exited {done.returncode}: "
                          + " / ".join(tail))
    return f"`{line}` exited 0" + (f": {tail[-1]}" if tail else "")


def _upgrade_in_sim(ctx: CampaignContext, host: str) -> str:
    lab = ctx.bench.site.lab
    if lab is None:
        raise RemoteError(f"upgrade method sim needs the simulator lab: {ctx.inventory_path} "
                          "is not the inventory of the running `vgpu sim up` lab; use method "
                          "command or manual on a real cluster")
    spec = ctx.campaign.upgrade
    faults = spec.faults.get(host)
    asked = {} if faults is None else {
        "drop_vib": float(faults.drop_vib), "unload_module": float(faults.unload_module),
        "slowdown": faults.slowdown_pct / 100.0}
    time.sleep(1.0)  # boot times are to the second: the upgrade's boot is a later one
    return f"simulated upgrade: {lab.upgrade_host(host, spec.esxi_build, spec.vib_version, asked)}"


def _undrain(ctx: CampaignContext, state: CampaignState, host: HostProgress) -> str:
    record = drainrecord.load(ctx.dirs.records, host.host)
    if record.undrained_at is not None:
        return f"out of maintenance mode since {record.undrained_at}"
    facts = undrain(ctx.inventory, ctx.inventory_path, host.host, _paths(ctx),
                    ctx.connect_timeout_s, True, ctx.say)
    driver = facts.host_driver
    host.after = {"esxi_build": facts.build,
                  "host_driver": f"{driver.name} {driver.version}" if driver else None}
    return (f"out of maintenance mode: ESXi build {record.esxi_build} -> {facts.build}, "
            f"host driver {record.host_driver or '-'} -> {host.after['host_driver'] or '-'}")


def _revalidate(ctx: CampaignContext, state: CampaignState, host: HostProgress) -> str:
    outcome = _revalidation(ctx, state, host, capture=False)
    ctx.show(outcome)
    host.drift = list((outcome.drift or {}).get("rows", []))
    host.verdicts = verdict_rows(outcome.verdicts)
    if outcome.could_not_run:
        host.left_in = _left_in(ctx, host, "revalidate")
        raise Stop(saved.STOPPED, f"{host.host}: revalidation could not run: "
                   + "; ".join(f"scenario {k}: {v}" for k, v in outcome.could_not_run.items())
                   + f". {host.left_in}", EXIT_COULD_NOT_RUN)
    if not host.after:
        record = drainrecord.load(ctx.dirs.records, host.host)
        host.after = {"esxi_build": None, "host_driver": None, "undrained_at":
                      record.undrained_at}
    return f"{len(outcome.verdicts)} workload verdict(s), {len(host.drift)} drift row(s)"


def _gate(ctx: CampaignContext, state: CampaignState, host: HostProgress) -> str:
    if host.decided_by is not None and host.decided_by != "verdict":
        return f"promoted by {host.decided_by}"
    verdict, why = gate_verdict(host.verdicts, ctx.campaign.gate_on_bare_metal)
    host.verdict = verdict
    if verdict == "PASS":
        host.decided_by = "verdict"
        return f"PASS: {why}"
    host.left_in = _left_in(ctx, host, "gate")
    if verdict == "FAIL":
        host.decided_by = "verdict"
        raise Stop(saved.STOPPED, f"{host.host}: FAIL: {why}. {host.left_in} The hosts after "
                   "it were not touched", EXIT_FAIL)
    if verdict is None:
        raise Stop(saved.STOPPED, f"{host.host}: nothing judged: {why}", EXIT_NO_REFERENCE)
    raise Stop(saved.PAUSED, f"{host.host}: INCONCLUSIVE: {why}. Decide: `vgpu campaign "
               f"continue {state.campaign_file} --accept` (promote it), `--rerun` (judge it "
               "again with a new revalidation), or `vgpu campaign abort`", EXIT_INCONCLUSIVE)


def _with_tolerance(scenario: Scenario, tolerance_pct: float | None) -> Scenario:
    if tolerance_pct is None:
        return scenario
    tolerances = scenario.tolerances.model_copy(update={"throughput_pct": tolerance_pct})
    return scenario.model_copy(update={"tolerances": tolerances})


def _revalidation(ctx: CampaignContext, state: CampaignState, host: HostProgress,
                  capture: bool) -> RevalidateOutcome:
    """The host's capture or revalidation, under a state name of the campaign's own: a
    resumed campaign continues it (finished scenarios are not run again)."""
    scenarios = [_with_tolerance(catalog.load(s), ctx.campaign.tolerance_pct)
                 for s in ctx.campaign.scenarios]
    with ResultStore.open(ctx.db) as store:
        choice = choose_baseline(store, ctx.campaign.baseline, host.host, None, capture,
                                 False, [s.id for s in scenarios]) if not capture else \
            choose_baseline(None, ctx.campaign.baseline, host.host, None, True, False, [])
        request = RevalidateRequest(
            inventory=ctx.inventory, inventory_path=ctx.inventory_path, scenarios=scenarios,
            bench=replace(ctx.bench), facts_dir=ctx.dirs.facts,
            state_dir=ctx.dirs.revalidations, baseline=ctx.campaign.baseline,
            capture_baseline=capture, choice=choice,
            capture=CapturePlan(ctx.campaign.baseline_series, 0.0),
            state_name=host.revalidation_name(state.name, capture))
        return revalidate(request, store, ctx.console, ctx.converge)
