"""`vgpu apply` of a bare-metal scenario: cut each bare-metal host's GPUs into the planned
MIG layout through NVML, on this machine directly or on a remote host over SSH (the
layout program is shipped and run there with sudo)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from vgpu.model.inventory import Inventory
from vgpu.model.plan import Plan
from vgpu.model.scenario import Scenario
from vgpu.nvml.backend import GpuBackend
from vgpu.nvml.layout import ApplyResult
from vgpu.nvml.spec import LayoutSpec
from vgpu.nvml.state import StateStore
from vgpu.site import Site

Log = Callable[[str], None]


def _local_hosts(plan: Plan, inventory: Inventory | None) -> set[str]:
    """Plan hosts that are this machine (all of them when there is no inventory)."""
    if inventory is None:
        return set(plan.hosts)
    return {h.name for h in inventory.bare_metal if h.is_local}


def apply_bare_metal(scenario: Scenario, site: Site, *, enable_mig: bool = False,
                     dry_run: bool = False, accept_new_host_keys: bool = False,
                     log: Log = print) -> list[str]:
    """Create the scenario's MIG layout on every host the site's plan uses (this machine
    when the site has no inventory); returns one line per created MIG device (host,
    instance, profile@start, UUID)."""
    plan = site.plan(scenario)
    inventory, inventory_path = site.inventory, site.inventory_path
    local = _local_hosts(plan, inventory)
    lines: list[str] = []
    for host in sorted({vm.host for vm in plan.vms}):
        if host in local:
            lines += _apply_here(plan, host, scenario, enable_mig, dry_run, log)
        else:
            assert inventory is not None and inventory_path is not None
            lines += _apply_remote(plan, host, scenario, inventory, inventory_path,
                                   enable_mig, dry_run, accept_new_host_keys)
    return lines


def apply_layouts_here(
    backend: GpuBackend, specs: list[LayoutSpec], stores: Callable[[], StateStore], *,
    source: str, gpu_flag_given: bool = False, enable_mig: bool = False,
    replace_existing: bool = False, dry_run: bool = False, log: Log = print,
) -> list[ApplyResult]:
    """The one way a MIG layout is applied on this machine (`vgpu mig apply` and `vgpu
    apply` of a bare-metal scenario): every planned GPU checked first, then each layout."""
    from vgpu.nvml.layout import apply_layout
    from vgpu.nvml.preconditions import check_gpus_present

    check_gpus_present(backend, specs, source, gpu_flag_given=gpu_flag_given)
    return [apply_layout(backend, spec, stores(), enable_mig=enable_mig,
                         replace_existing=replace_existing, dry_run=dry_run, source=source,
                         log=log) for spec in specs]


def result_lines(result: ApplyResult, prefix: str = "") -> list[str]:
    """What was done on one GPU, a line each, ``prefix`` before every line (the host)."""
    lines = [f"{prefix}GPU {result.gpu}: {a}" for a in result.actions]
    lines += [f"{prefix}GPU {result.gpu}: {c.owner}: {c.profile}@{c.start} -> {c.uuid}"
              for c in result.created]
    return lines


def _apply_here(plan: Plan, host: str, scenario: Scenario, enable_mig: bool, dry_run: bool,
                log: Log) -> list[str]:
    from vgpu.nvml.from_plan import layouts_from_plan
    from vgpu.nvml.select import backend_for_this_machine

    backend = backend_for_this_machine()
    if backend.simulated:
        log(backend.description)
    specs = layouts_from_plan(plan, None, host=host if len(plan.hosts) > 1 else None)
    results = apply_layouts_here(backend, specs, StateStore, source=scenario.source or
                                 scenario.id, enable_mig=enable_mig, dry_run=dry_run, log=log)
    return [line for result in results for line in result_lines(result, f"{host} ")]


def _apply_remote(plan: Plan, host: str, scenario: Scenario, inventory: Inventory,
                  inventory_path: Path, enable_mig: bool, dry_run: bool,
                  accept_new_host_keys: bool) -> list[str]:
    from vgpu.nvml.remote import apply_plan_on_host
    from vgpu.provision.adapter import jobs_from_plan
    from vgpu.remote.hostlog import HostLog
    from vgpu.remote.redact import Redactor
    from vgpu.remote.ssh import SSHTransport
    from vgpu.remote.targets import ConnectOptions

    job = next(j for j in jobs_from_plan(plan, scenario, inventory,
                                         inventory_dir=inventory_path.parent)
               if j.target.name == host)
    options = ConnectOptions(connect_timeout=inventory.ssh.connect_timeout_s,
                             command_timeout=inventory.ssh.command_timeout_s,
                             accept_new_host_keys=accept_new_host_keys)
    log_path = Path("vgpu-results/logs/mig") / f"{host}.log"
    transport = SSHTransport(job.target, options, HostLog(log_path, Redactor()))
    try:
        transport.connect()
        results = apply_plan_on_host(transport, plan, host, enable_mig=enable_mig,
                                     dry_run=dry_run)
    finally:
        transport.close()
    lines: list[str] = []
    for r in results:
        lines += [f"{host} GPU {r.get('gpu')}: {a}" for a in r.get("actions", [])]
        lines += [f"{host} GPU {r.get('gpu')}: {d.get('owner')}: {d.get('profile')}@"
                  f"{d.get('start')} -> {d.get('uuid')}" for d in r.get("created", [])]
    return lines
