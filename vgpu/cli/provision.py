"""``vgpu provision``: bring every guest of a scenario to its desired state over SSH."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vgpu.cli.common import console, scenario_from_args, site_of
from vgpu.cli.options import InventoryOpt, ScenarioFile, ScenarioRef
from vgpu.cli.root import app
from vgpu.errors import InputError, RemoteError
from vgpu.runpaths import new_run_dir

if TYPE_CHECKING:  # paramiko behind these: loaded when provisioning runs
    from vgpu.container.images import HeldImage
    from vgpu.model.inventory import Inventory
    from vgpu.model.scenario import Scenario
    from vgpu.provision.adapter import HarnessOptions
    from vgpu.provision.fanout import Job
    from vgpu.provision.report import RunReport
    from vgpu.remote.targets import ConnectOptions
    from vgpu.site import Site

DEFAULT_LOG_DIR = Path("vgpu-results/logs/provision")
DEFAULT_STATE_DIR = Path("~/.vgpu/state")


def _needed(site: Site) -> tuple[Inventory, Path]:
    return site.require("provisioning needs an inventory (SSH user, key, known_hosts, "
                        "driver and licence files)",
                        fix="pass --inventory FILE (see inventory/lab.example.yaml)")


def run_provision(jobs: list[Job], *, scenario_id: str, options: ConnectOptions,
                  log_dir: Path, state_dir: Path, dry_run: bool, concurrency: int,
                  all_jobs: list[Job] | None = None, source: str = "inventory") -> RunReport:
    """Fan out with a live table, print the summary; raise RemoteError if any host failed."""
    from vgpu.provision.display import LiveTable, summary
    from vgpu.provision.fanout import provision_all
    from vgpu.remote.redact import RedactingFilter, Redactor

    redactor = Redactor()
    for handler in logging.getLogger().handlers:  # whatever logging the user configured
        handler.addFilter(RedactingFilter(redactor))
    table = LiveTable([job.target.name for job in jobs], redactor)
    run_dir = new_run_dir(log_dir, scenario_id)
    with table.live(console):
        report = provision_all(jobs, options=options, log_dir=run_dir,
                               state_dir=state_dir.expanduser(), scenario=scenario_id,
                               dry_run=dry_run, concurrency=concurrency, redactor=redactor,
                               on_event=table.event, mesh_members=all_jobs, source=source)
    console.print(summary(report, redactor))
    console.print(f"logs: {run_dir}")
    if report.failed_hosts:
        raise RemoteError(redactor.redact(
            f"{len(report.failed_hosts)} of {len(report.hosts)} hosts failed:\n"
            + "\n".join(report.failure_lines())))
    return report


@app.command()
def provision(
    file: ScenarioFile = None,
    scenario: ScenarioRef = None,
    inventory: InventoryOpt = None,
    host: Annotated[list[str] | None, typer.Option(
        "--host", help="only these VMs / hosts (repeatable)")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="show what would change; change nothing")] = False,
    accept_new_host_keys: Annotated[bool, typer.Option(
        "--accept-new-host-keys",
        help="trust hosts not yet in known_hosts and record their keys (a CHANGED key is "
             "always refused)")] = False,
    concurrency: Annotated[int, typer.Option("--concurrency", "--parallel", min=1, max=256,
                                             help="hosts provisioned at once")] = 16,
    log_dir: Annotated[Path, typer.Option(help="per-host logs go in a run folder here")] =
        DEFAULT_LOG_DIR,
    state_dir: Annotated[Path, typer.Option(
        help="keeps the per-scenario SSH key for password-less SSH")] = DEFAULT_STATE_DIR,
    harness_deps: Annotated[bool, typer.Option(
        "--harness-deps/--no-harness-deps",
        help="pip-install the harness's pinned dependencies in its venv")] = True,
    harness_python: Annotated[str, typer.Option(help="python on the guest for the venv")] =
        "python3",
    harness_site: Annotated[list[str] | None, typer.Option(
        "--harness-site", help="extra site directory for the harness venv (repeatable; for "
        "guests with the dependencies already installed)")] = None,
    retries: Annotated[int, typer.Option(min=0, max=10,
                                         help="connection retries per host")] = 3,
) -> None:
    """Provision the guests of a scenario over SSH: packages, Docker, NVIDIA driver and
    container toolkit, vGPU licensing, password-less SSH, the node harness; then check
    that nvidia-smi shows exactly the planned vGPU / MIG profile. Idempotent."""
    sc = scenario_from_args(file, scenario)

    from vgpu.provision.adapter import HarnessOptions

    provision_scenario(
        sc, site_of(inventory), hosts=host, dry_run=dry_run,
        accept_new_host_keys=accept_new_host_keys, concurrency=concurrency, log_dir=log_dir,
        state_dir=state_dir, retries=retries,
        harness=HarnessOptions(install_requirements=harness_deps, python=harness_python,
                               extra_site_dirs=tuple(harness_site or ())))


def provision_jobs(
    sc: Scenario, site: Site, *, hosts: list[str] | None = None,
    harness: HarnessOptions | None = None,
) -> tuple[list[Job], list[Job], Inventory]:
    """The jobs to run (the selected hosts) and every job of the scenario, checked locally:
    raises InputError for anything provisioning would miss, before any host is touched."""
    from vgpu.provision.adapter import HarnessOptions, jobs_from_plan, missing_addresses
    from vgpu.provision.fanout import preflight

    inv, inventory_path = _needed(site)
    plan = site.plan(sc)
    missing = missing_addresses(plan)
    if missing:
        raise InputError.single(str(inventory_path), "network",
                                f"no IP address for {', '.join(missing)}",
                                fix="add network.static entries or an ip_pool")
    wanted = set(hosts or [])
    all_jobs = jobs_from_plan(plan, sc, inv, inventory_dir=inventory_path.parent,
                              harness=harness or HarnessOptions())
    jobs = [job for job in all_jobs if not wanted or job.target.name in wanted]
    unknown = wanted - {job.target.name for job in all_jobs}
    if unknown:
        raise InputError.single("command line", "--host",
                                f"{', '.join(sorted(unknown))} not in the plan",
                                fix="use VM names from `vgpu plan`")
    preflight(jobs, str(inventory_path))
    return jobs, all_jobs, inv


def provision_scenario(
    sc: Scenario, site: Site, *, hosts: list[str] | None = None,
    dry_run: bool = False, accept_new_host_keys: bool = False, concurrency: int = 16,
    log_dir: Path = DEFAULT_LOG_DIR, state_dir: Path = DEFAULT_STATE_DIR, retries: int = 3,
    harness: HarnessOptions | None = None, held_image: HeldImage | None = None,
) -> RunReport:
    """Plan the scenario on the site's inventory and provision its guests (also run by
    `vgpu apply` once the VMs are up)."""
    from vgpu.remote.targets import ConnectOptions

    _, inventory_path = _needed(site)
    sc, harness = _on_simulator_guests(sc, site, harness)
    jobs, all_jobs, inv = provision_jobs(sc, site, hosts=hosts, harness=harness)
    if held_image is not None:
        from vgpu.provision.adapter import holding_image

        jobs = holding_image(jobs, held_image)
    if sc.platform == "vsphere":
        from vgpu.provision.host_drivers import judge_against_guest_hosts

        jobs, notes = judge_against_guest_hosts(jobs, inv, inventory_path)
        for note in notes:
            console.print(f"note: {note}", highlight=False)
    options = ConnectOptions(connect_timeout=inv.ssh.connect_timeout_s,
                             command_timeout=inv.ssh.command_timeout_s, retries=retries,
                             accept_new_host_keys=accept_new_host_keys)
    return run_provision(jobs, scenario_id=sc.id, options=options, log_dir=log_dir,
                         state_dir=state_dir, dry_run=dry_run, concurrency=concurrency,
                         all_jobs=all_jobs, source=str(inventory_path))


def _on_simulator_guests(sc: Scenario, site: Site, harness: HarnessOptions | None,
                         ) -> tuple[Scenario, HarnessOptions | None]:
    """On `vgpu sim up`'s guests the harness image is built FROM the lab's base with ONNX
    Runtime's CPU build (a lab with a real Docker daemon), else the harness is a venv with
    this machine's packages."""
    from vgpu.provision.adapter import HarnessOptions

    lab = site.lab
    if lab is None:
        return sc, harness
    options = harness or HarnessOptions()
    adapted = lab.on_guests(sc)
    if adapted.guest.effective_runtime != sc.guest.effective_runtime or \
            adapted.guest.effective_runtime == "container":
        console.print(f"note: {lab.runtime_note()}", highlight=False)
    if adapted.guest.effective_runtime == "container":
        return adapted, dataclasses.replace(options, gpu_image=False)
    return adapted, HarnessOptions(
        install_requirements=False, python=options.python,
        extra_site_dirs=(*options.extra_site_dirs, *lab.harness_site_dirs()))
