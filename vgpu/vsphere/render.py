"""Rich rendering for the vSphere commands: change sets, outcomes, preflight verdicts."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from vgpu.vsphere.apply.execute import ExecutionReport
from vgpu.vsphere.apply.power import shutdown_label
from vgpu.vsphere.desired.limits import DEFAULT_SHUTDOWN_TIMEOUT_S
from vgpu.vsphere.plan.diff import Action, ChangeSet, Step, VmChange
from vgpu.vsphere.preflight.checks import PreflightReport
from vgpu.vsphere.preflight.drift import Drift

ACTION_STYLE = {Action.CREATE: "green", Action.CHANGE: "yellow", Action.KEEP: "dim",
                Action.DELETE: "red"}


def _created_summary(change: VmChange) -> str:
    want = change.desired
    assert want is not None
    parts = [f"{want.num_cpus} vCPU", f"{want.memory_mb // 1024} GB"
             + (" reserved" if want.memory_reservation_locked else ""), want.firmware.upper()]
    parts += list(want.vgpus) + [f"passthrough {d.pci_id}" for d in want.passthrough]
    if want.rdma_nic:
        parts.append(f"RDMA NIC {want.rdma_nic.summary}")
    if want.network:
        parts.append(f"IP {want.network.ip}")
    if want.extra_config:
        parts.append(f"{len(want.extra_config)} advanced settings")
    return ", ".join(parts)


def _details(change: VmChange) -> str:
    if change.action is Action.CREATE:
        return _created_summary(change)
    if change.action is Action.DELETE:
        actual = change.actual
        return f"owned by vgpu, on {actual.host}" if actual else ""
    return "; ".join(f"{f.field}: {f.current} -> {f.wanted}" for f in change.fields) or "-"


def step_text(step: Step, shutdown_timeout_s: float) -> str:
    return shutdown_label(shutdown_timeout_s) if step is Step.POWER_OFF else step.value


def render_changes(changes: ChangeSet, console: Console, title: str,
                   shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S) -> None:
    table = Table(title=title)
    for col in ("VM", "action", "host", "what", "vCenter steps"):
        table.add_column(col, overflow="fold")
    for change in changes.changes:
        host = change.desired.host if change.desired else (
            change.actual.host if change.actual else "")
        style = ACTION_STYLE[change.action]
        table.add_row(change.name, f"[{style}]{change.action.value}[/]", host or "",
                      _details(change),
                      ", ".join(step_text(s, shutdown_timeout_s) for s in change.steps) or "-")
    console.print(table)
    console.print(f"plan: {changes.summary()}")


def render_outcomes(report: ExecutionReport, console: Console) -> None:
    for outcome in report.outcomes:
        if outcome.ok:
            how = f", {outcome.shutdown}" if outcome.shutdown else ""
            console.print(f"[green]ok[/] {outcome.name}: {outcome.action.value} "
                          f"({outcome.tasks} task(s), {outcome.seconds:.1f} s{how})")
        else:
            console.print(f"[red]FAILED[/] {outcome.name}: {outcome.error}")
    done = len(report.outcomes) - len(report.failed)
    console.print(f"{done} of {len(report.outcomes)} VM(s) done, {report.tasks} vCenter "
                  f"task(s), {report.seconds:.1f} s")


def render_preflight(report: PreflightReport, console: Console) -> None:
    console.print(f"[bold]Preflight[/] {report.vcenter} ({report.vcenter_version}), "
                  f"inventory {report.inventory}"
                  + (f", scenario {report.scenario}" if report.scenario else ""))
    if report.template:
        console.print(f"template {report.template}: {report.template_firmware} firmware "
                      "(the VMs boot with EFI)")
    hosts = Table(title="hosts")
    for col in ("host", "ESXi", "host driver", "state", "GPUs", "graphics", "vGPU types",
                "MIG types", "verdict"):
        hosts.add_column(col, overflow="fold")
    for h in report.hosts:
        models: dict[str, int] = {}
        for g in h.gpus:
            models[g.model] = models.get(g.model, 0) + 1
        gpus = ", ".join(f"{n} x {m}" for m, n in models.items()) or "none"
        state = h.connection_state + (", maintenance" if h.in_maintenance else "")
        graphics = "Shared Direct" if h.graphics_default_type == "sharedDirect" \
            else (h.graphics_default_type or "-")
        esxi = f"{h.version} ({h.build})" if h.version else "-"
        verdict = "[green]PASS[/]" if h.ok else "[red]FAIL[/]"
        driver = f"{h.host_driver} {h.host_driver_version}" if h.host_driver \
            else (h.host_driver_note or "-")
        hosts.add_row(h.name, esxi, driver, state, gpus, graphics, str(len(h.vgpu_types)),
                      str(len(h.mig_types)), verdict)
    console.print(hosts)
    for h in report.hosts:
        if h.assignment_policy:
            console.print(f"host {h.name}: GPU assignment policy {h.assignment_policy}",
                          highlight=False)

    title = "GPU capacity: vGPUs already held" + (
        f" (scenario {report.scenario}'s own VMs not counted)" if report.scenario else "")
    usage = Table(title=title)
    for col in ("host", "GPU", "PCI", "model", "graphics", "passthrough", "MIG", "mode",
                "held by", "free slices"):
        usage.add_column(col, overflow="fold")
    for h in report.hosts:
        for g in h.gpus:
            free = f"{g.free_memory_slices} mem / {g.free_compute_slices} compute" \
                if g.free_memory_slices is not None else "-"
            mig_capable = "-" if g.mig_capable is None else ("yes" if g.mig_capable else "no")
            if g.vgpu_mode:
                mig_capable += f" ({g.vgpu_mode})"
            model = f"{g.model} (board {g.board})" if g.board else g.model
            usage.add_row(h.name, str(g.index), g.pci_id, model, g.graphics_type or "-",
                          g.passthrough or "-", mig_capable, g.mode,
                          ", ".join(g.held) or "-", free)
    console.print(usage)

    failed = [(h.name, c) for h in report.hosts for c in h.checks if not c.ok]
    failed += [("scenario", c) for c in report.scenario_checks if not c.ok]
    checks = Table(title="checks")
    for col in ("where", "check", "result", "detail"):
        checks.add_column(col, overflow="fold")
    for h in report.hosts:
        for c in h.checks:
            checks.add_row(h.name, c.name, "[green]ok[/]" if c.ok else "[red]FAIL[/]", c.detail)
    for c in report.scenario_checks:
        checks.add_row("scenario", c.name, "[green]ok[/]" if c.ok else "[red]FAIL[/]", c.detail)
    console.print(checks)
    for note in report.notes:
        console.print(f"[yellow]note:[/] {note}")
    verdict = "[bold green]PASS[/]" if report.ok else \
        f"[bold red]FAIL[/] ({len(failed)} check(s) failed)"
    console.print(f"verdict: {verdict}")


def render_drift(drift: Drift, console: Console) -> None:
    title = f"drift since {drift.before_id}"
    if not drift.rows:
        console.print(f"{title}: no change")
        return
    table = Table(title=title)
    for col in ("host", "what", "before", "now", "effect"):
        table.add_column(col, overflow="fold")
    for row in drift.rows:
        effect = f"[red]breaks: {row.why}[/]" if row.breaking else "[dim]informational[/]"
        table.add_row(row.host, row.field, row.before, row.after, effect)
    console.print(table)
    breaking = sum(r.breaking for r in drift.rows)
    console.print(f"drift: {len(drift.rows)} change(s), "
                  + (f"[bold red]{breaking} breaking[/]" if breaking else "none breaking"))
