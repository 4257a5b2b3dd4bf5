"""The bodies of `vgpu preflight`, `vgpu apply` and `vgpu destroy`: read, show, confirm,
execute with progress, and report. The CLI (vgpu.cli.vsphere) parses, asks for confirmation
(``Confirm``) and turns what these raise into exit codes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from vgpu.errors import RemoteError
from vgpu.model.inventory import Inventory
from vgpu.model.load import vgpu_requests
from vgpu.model.scenario import Scenario
from vgpu.vsphere.apply.execute import Executor, VmOutcome
from vgpu.vsphere.apply.lease import LabLease
from vgpu.vsphere.connect.connection import Session, connect, resolve_placement
from vgpu.vsphere.connect.from_inventory import placement_from_inventory, target_from_inventory
from vgpu.vsphere.connect.privileges import apply_needs, require
from vgpu.vsphere.desired.assignment import ESXCLI_CONSOLIDATION
from vgpu.vsphere.desired.limits import DEFAULT_IP_TIMEOUT_S
from vgpu.vsphere.plan.diff import ChangeSet, Step
from vgpu.vsphere.plan.gpu_placement import apply_policy_changes, placement_mismatches
from vgpu.vsphere.plan.host_options import HostOptionChange, apply_host_options
from vgpu.vsphere.plan.reconcile import ClusterState, read_state
from vgpu.vsphere.plan.workflow import ApplyPreparation, prepare_apply, prepare_destroy
from vgpu.vsphere.plan.xorg import (
    XorgBlocked,
    needs_restart,
    put_in_effect,
    refuse_if_vgpu_vms_run,
)
from vgpu.vsphere.preflight.drift import CHECK_PREFIX, Drift, compute_drift, scenario_vgpu_types
from vgpu.vsphere.preflight.run import run_preflight
from vgpu.vsphere.preflight.saved import find_saved, load_saved, save_report
from vgpu.vsphere.render import render_changes, render_drift, render_outcomes, render_preflight

Confirm = Callable[[str], bool]


def _execute(state: ClusterState, changes: ChangeSet, concurrency: int, ip_timeout_s: float,
             console: Console) -> list[VmOutcome]:
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                  TimeElapsedColumn(), console=console, transient=not console.is_terminal,
                  ) as progress:
        rows = {c.name: progress.add_task(f"{c.name}: queued", total=len(c.steps))
                for c in changes.pending}

        def on_step(name: str, step: Step) -> None:
            progress.update(rows[name], description=f"{name}: {step.value}")

        def on_done(name: str, outcome: VmOutcome) -> None:
            status = "done" if outcome.ok else "[red]failed[/]"
            progress.update(rows[name], description=f"{name}: {status}",
                            completed=len(outcome.steps_done))

        executor = Executor(state.placement, state.hosts, concurrency=concurrency,
                            ip_timeout_s=ip_timeout_s, on_step=on_step, on_done=on_done)
        report = executor.run(changes)
    render_outcomes(report, console)
    for note in report.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    return report.failed


def _fail_if_any(failed: list[VmOutcome], total: int, command: str) -> None:
    if failed:
        lines = "\n".join(f"  {o.name}: {o.error}" for o in failed)
        raise RemoteError(f"{len(failed)} of {total} VM(s) failed; the others finished:\n"
                          f"{lines}\nfix the cause and run `vgpu {command}` again: it "
                          "continues from where each VM stopped")


def preflight(inventory: Inventory, inventory_path: Path, scenario: Scenario | None,
              results_dir: Path, as_json: bool, console: Console,
              against: str | None = None) -> None:
    # A bad --against is refused before vCenter is reached.
    before = load_saved(find_saved(against, results_dir, inventory_path)) if against else None
    with connect(target_from_inventory(inventory, inventory_path)) as session:
        report = run_preflight(session, inventory, inventory_path, scenario)
    drift = None
    if before is not None:
        used = scenario_vgpu_types(vgpu_requests(scenario)) if scenario else set()
        drift = compute_drift(before, report, used)
        report.drift = drift.to_json()
    saved = save_report(report, results_dir)
    drift_file = _save_drift(drift, report.id, results_dir) if drift else None
    if as_json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        render_preflight(report, console)
        if drift is not None:
            render_drift(drift, console)
            console.print(f"drift saved to {drift_file}")
        console.print(f"facts saved to {saved} (run id {report.id})")
    problems = report.failures() if not report.ok else []
    if drift is not None and drift.breaking:
        # Checks that now fail are listed above already.
        problems += [f"drift since {drift.before_id}: {r.host}: {r.field}: {r.before} -> "
                     f"{r.after} ({r.why})" for r in drift.rows
                     if r.breaking and not r.field.startswith(CHECK_PREFIX)]
        problems.append(f"drift since {drift.before_id}: "
                        f"{sum(r.breaking for r in drift.rows)} breaking change(s)")
    if problems:
        raise RemoteError("preflight failed:\n  " + "\n  ".join(problems))


def _save_drift(drift: Drift, report_id: str | None, results_dir: Path) -> Path:
    """The drift beside the saved facts, as drift-<new run id>.json."""
    drift.after_id = report_id
    path = results_dir / f"drift-{report_id}.json"
    path.write_text(json.dumps(drift.to_json(), indent=2) + "\n", encoding="utf-8")
    return path


def _show_host_options(changes: list[HostOptionChange], console: Console) -> None:
    for change in changes:
        console.print(f"host {change.host}: advanced option {change.key}: "
                      f"{change.current.text} -> {change.wanted}")


def _lab_lease(session: Session, inventory: Inventory, inventory_path: Path, command: str,
               break_lease: bool, console: Console) -> LabLease:
    """The lease on the inventory's lab, taken in its VM folder (vgpu.vsphere.apply.lease)."""
    names = placement_from_inventory(inventory, inventory_path)
    folder = resolve_placement(session, names).folder
    return LabLease(session, folder, names.lab, command, break_lease=break_lease,
                    warn=lambda text: console.print(f"[yellow]warning:[/] {text}",
                                                    highlight=False))


def _shown_apply(prep: ApplyPreparation, scenario: Scenario, console: Console,
                 host: str | None) -> int:
    """Show what apply would do; the number of changes."""
    on_host = f" on host {host}" if host else ""
    render_changes(prep.changes, console, title=f"apply scenario {scenario.id} "
                   f"({scenario.name}){on_host}, plan {prep.plan.plan_hash}")
    _show_host_options(prep.host_options, console)
    for change in prep.policy_changes:
        console.print(change.describe(), highlight=False)
    for note in prep.scenario_state.notes:
        console.print(f"[yellow]note:[/] {note}")
    return len(prep.changes.pending) + len(prep.host_options) + len(prep.policy_changes)


def _what_changes(prep: ApplyPreparation) -> list[object]:
    """What a confirmation agreed to: every VM's action, steps and fields, and the host
    settings."""
    return ([(c.name, c.action, c.steps, c.fields) for c in prep.changes.changes]
            + [(h.host, h.key, h.wanted) for h in prep.host_options]
            + [p.describe() for p in prep.policy_changes])


def apply(scenario: Scenario, inventory: Inventory, inventory_path: Path, *, dry_run: bool,
          confirm: Confirm, concurrency: int, ip_timeout_s: float, console: Console,
          host: str | None = None, break_lease: bool = False) -> None:
    """Read, show, ask; then under the lab's lease read again (what was agreed to must still
    be what would be done) and change. A dry run, a refusal and a plan with nothing to do
    take no lease. ``host``: every VM of the scenario on that host (refused when they do
    not fit)."""
    command = f"vgpu apply --scenario {scenario.id}"
    with connect(target_from_inventory(inventory, inventory_path)) as session:
        if not dry_run:
            _lab_lease(session, inventory, inventory_path, command, break_lease,
                       console).check_free()
        prep = prepare_apply(session, scenario, inventory, inventory_path, pin_host=host)
        pending = _shown_apply(prep, scenario, console, host)
        if not pending:
            console.print("nothing to change: vCenter already matches the plan")
            mismatches = _check_placement(session, prep, inventory, inventory_path, console)
            _fail_on_mismatch(mismatches)
            return
        if dry_run:
            try:
                _refuse_policy_under_vgpu_vms(prep)
            except XorgBlocked as blocked:
                console.print(f"[yellow]note:[/] apply would refuse: {blocked}",
                              highlight=False)
            console.print("dry run: nothing changed")
            return
        _refuse_policy_under_vgpu_vms(prep)
        _require_apply_privileges(session, prep, command)
        if not confirm(f"apply {pending} change(s)?"):
            console.print("nothing changed")
            return
        with _lab_lease(session, inventory, inventory_path, command, break_lease, console):
            again = prepare_apply(session, scenario, inventory, inventory_path,
                                  pin_host=host)
            if _what_changes(again) != _what_changes(prep):
                _shown_apply(again, scenario, console, host)
                raise RemoteError("vCenter changed while the plan was shown: what apply would "
                                  "do now (above) is not what was confirmed; nothing was "
                                  "changed; run `vgpu apply` again")
            prep = again
            _refuse_policy_under_vgpu_vms(prep)
            # Host settings (ATS) first: the VMs power on with them in place.
            for line in apply_host_options(prep.host_options):
                console.print(f"set {line}")
            for line in apply_policy_changes(prep.policy_changes):
                console.print(f"set {line}", highlight=False)
            for change in prep.policy_changes:
                console.print(put_in_effect(prep.state.hosts[change.host],
                                            [change.setting()]), highlight=False)
            failed = _execute(prep.state, prep.changes, concurrency, ip_timeout_s, console)
        mismatches = _check_placement(session, prep, inventory, inventory_path, console)
    _fail_if_any(failed, len(prep.changes.pending), "apply")
    _fail_on_mismatch(mismatches)


def _require_apply_privileges(session: Session, prep: ApplyPreparation, command: str) -> None:
    """Refuse before the first change unless the session holds what apply will use."""
    changed = {c.host for c in prep.host_options} | {c.host for c in prep.policy_changes}
    hosts = [(name, prep.state.hosts[name].ref) for name in sorted(changed)
             if name in prep.state.hosts]
    require(session, command, apply_needs(prep.state.placement, hosts))


def _refuse_policy_under_vgpu_vms(prep: ApplyPreparation) -> None:
    """A policy change needs Xorg restarted, which vGPU VMs running on the host forbid:
    refused before anything changes."""
    for change in prep.policy_changes:
        facts = prep.state.hosts.get(change.host)
        if facts is not None and needs_restart(facts):
            refuse_if_vgpu_vms_run(facts, [change.setting()])


def _fail_on_mismatch(mismatches: list[str]) -> None:
    if mismatches:
        raise RemoteError("ESXi did not share the GPUs the way the plan does (the "
                          "measurement would not be the scenario's):\n  "
                          + "\n  ".join(mismatches) +
                          f"\nset the GPU assignment policy to consolidation on the host "
                          f"(`{ESXCLI_CONSOLIDATION}`), then power the VMs off and run "
                          "`vgpu apply` again")


def _check_placement(session: Session, prep: ApplyPreparation, inventory: Inventory,
                     inventory_path: Path, console: Console) -> list[str]:
    """Read back where ESXi put each powered-on vGPU VM and compare it with the plan."""
    if not any(d.planned_gpus for d in prep.desired):
        return []
    state = read_state(session, placement_from_inventory(inventory, inventory_path))
    mismatches = [m.describe() for m in placement_mismatches(prep.plan, inventory, state.hosts,
                                                             state.vms)]
    if not mismatches:
        console.print("GPU placement read back from the hosts: the VMs share GPUs as "
                      "planned")
    return mismatches


def _teardown_names(changes: ChangeSet) -> list[object]:
    return [(c.name, c.action, c.steps) for c in changes.changes]


def destroy(scenario: Scenario, inventory: Inventory, inventory_path: Path, *,
            confirm: Confirm, concurrency: int, console: Console,
            break_lease: bool = False) -> None:
    """Read, show, ask; then under the lab's lease read again and delete."""
    with connect(target_from_inventory(inventory, inventory_path)) as session:
        _lab_lease(session, inventory, inventory_path, f"vgpu destroy --scenario {scenario.id}",
                   break_lease, console).check_free()
        found, changes = prepare_destroy(session, scenario.id, inventory, inventory_path)
        title = f"destroy scenario {scenario.id} ({scenario.name})"
        render_changes(changes, console, title=title)
        if not changes.pending:
            console.print("nothing to delete: no VM of this scenario exists")
            return
        require(session, f"vgpu destroy --scenario {scenario.id}",
                apply_needs(found.placement))
        if not confirm(f"delete {len(changes.pending)} VM(s)?"):
            console.print("nothing changed")
            return
        with _lab_lease(session, inventory, inventory_path,
                        f"vgpu destroy --scenario {scenario.id}", break_lease, console):
            state, again = prepare_destroy(session, scenario.id, inventory, inventory_path)
            if _teardown_names(again) != _teardown_names(changes):
                render_changes(again, console, title=title)
                raise RemoteError("vCenter changed while the plan was shown: what destroy "
                                  "would do now (above) is not what was confirmed; nothing "
                                  "was deleted; run `vgpu destroy` again")
            failed = _execute(state, again, concurrency, DEFAULT_IP_TIMEOUT_S, console)
    _fail_if_any(failed, len(again.pending), "destroy")
