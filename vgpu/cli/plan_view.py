"""Rich rendering of a Plan: VM table, per-GPU slot diagrams, settings, steps, bench."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from vgpu import mig
from vgpu.model.plan import Plan, PlannedGpu
from vgpu.vsphere.desired.assignment import policy_lines


def gpu_diagram(gpu: PlannedGpu) -> list[str]:
    model = mig.gpu_model(gpu.model)
    placements = [mig.MigPlacement(model.profile(s.profile), s.start, owner=s.owner)
                  for s in gpu.slices]
    return mig.slot_diagram(model, placements, label=f"GPU {gpu.index}")


def render_plan(plan: Plan, console: Console) -> None:
    console.print(f"[bold]Plan[/] scenario {plan.scenario_id} ({plan.scenario_name}), "
                  f"{plan.platform}, GPU {plan.gpu_model}, inventory "
                  f"{plan.inventory or '(none)'}, plan hash {plan.plan_hash}")
    vms = Table(title="VMs" if plan.platform == "vsphere" else "instances")
    for col in ("name", "host", "vCPU", "memory", "vGPU", "vGPU type", "GPU", "start", "IP"):
        vms.add_column(col)
    for vm in plan.vms:
        for k, v in enumerate(vm.vgpus or [None]):  # type: ignore[list-item]
            first = k == 0
            vms.add_row(
                vm.name if first else "", vm.host if first else "",
                str(vm.vcpu) if first else "", f"{vm.memory_mb // 1024} GB" if first else "",
                v.label if v else "-", (v.vgpu_type or "-") if v else "-",
                str(v.gpu_index) if v else "-",
                str(v.start) if v and v.start is not None else "-",
                (vm.ip or "-") if first else "")
    console.print(vms)
    for vm in plan.vms:
        if vm.rdma_nic is not None:
            console.print(f"[bold]{vm.name}[/] RDMA NIC: {vm.rdma_nic.describe()} on {vm.host}")
    for gpu in plan.gpus:
        if gpu.mode == "unused":
            continue
        board = f" board {gpu.board}" if gpu.board else ""
        console.print(f"[bold]{gpu.host} GPU {gpu.index}[/] {gpu.model}{board} ({gpu.mode}"
                      f"{', ' + gpu.timesliced_type if gpu.timesliced_type else ''}): "
                      f"{', '.join(gpu.tenants) or '-'}")
        if gpu.mode == "mig":
            for line in gpu_diagram(gpu):
                console.print(line, markup=False, highlight=False)
    if plan.platform == "vsphere" and plan.vms:
        settings = Table(title="VM settings apply will set")
        settings.add_column("VMs")
        settings.add_column("settings")
        groups: dict[str, list[str]] = {}
        for vm in plan.vms:
            text = ", ".join(["firmware=efi", "memoryReservationLockedToMax=true",
                              *(f"{k}={v}" for k, v in vm.extra_config.items())])
            groups.setdefault(text, []).append(vm.name)
        for text, names in groups.items():
            settings.add_row(", ".join(names), text)
        console.print(settings)
    if plan.platform == "vsphere" and plan.vms:
        for line in policy_lines(plan):
            console.print(line, highlight=False)
    console.print(f"[bold]Guest steps:[/] {' -> '.join(plan.guest_steps)}")
    if plan.harness_base:
        console.print(f"[bold]Harness image FROM:[/] {plan.harness_base}", highlight=False)
    bench = Table(title="Bench matrix")
    for col in ("workload", "kind", "instances", "repeats"):
        bench.add_column(col)
    for item in plan.bench:
        bench.add_row(item.workload, item.kind, ", ".join(item.instances), str(item.repeats))
    console.print(bench)
    for note in plan.notes:
        console.print(f"[yellow]note:[/] {note}")
    print_warnings(plan, console)


def print_warnings(plan: Plan, console: Console) -> None:
    for warning in plan.warnings:
        console.print(f"[bold yellow]warning:[/] {warning}", highlight=False)
