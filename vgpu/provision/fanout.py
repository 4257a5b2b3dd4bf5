"""All hosts in parallel with bounded concurrency. One failing host never stops the others;
the report says which failed, at which step, why, and where its log is."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from vgpu import stepnames
from vgpu.errors import InputError, Problem
from vgpu.provision.report import HostReport, RunReport, StepReport
from vgpu.provision.requirements import GuestRequirements, MeshPeer, MeshSpec
from vgpu.provision.runner import EventSink, provision_host
from vgpu.provision.step import HostContext, Outcome
from vgpu.provision.steps import build_steps
from vgpu.provision.steps.mesh import scenario_key
from vgpu.remote.errors import ProvisionError
from vgpu.remote.hostkeys import lookup_key_lines
from vgpu.remote.hostlog import HostLog
from vgpu.remote.local import LocalTransport
from vgpu.remote.redact import MIN_SECRET_LENGTH, Redactor
from vgpu.remote.ssh import SSHTransport
from vgpu.remote.targets import ConnectOptions, HostTarget
from vgpu.remote.transport import Transport


@dataclass(frozen=True)
class Job:
    target: HostTarget
    requirements: GuestRequirements


TransportFactory = Callable[[HostTarget, HostLog], Transport]


def _host_problems(job: Job) -> list[tuple[str, str, str | None]]:
    """(field, message, fix) of everything missing locally for one host."""
    found: list[tuple[str, str, str | None]] = []
    for step in build_steps(job.requirements):
        for field_path, message, fix in step.preflight(job.requirements):
            found.append((field_path, f"step {step.name}: {message}", fix))
    key = job.target.key_file
    if key is not None and not key.expanduser().is_file():
        found.append(("ssh.key_file", f"SSH key {key} does not exist",
                      "point ssh.key_file at your private key, or unset it to use the SSH "
                      "agent"))
    try:
        job.target.sudo.read_password(job.target.name)
    except ProvisionError as exc:
        found.append(("ssh.sudo_password", exc.message, exc.fix))
    return found


def _hosts_phrase(hosts: list[str]) -> str:
    if len(hosts) == 1:
        return f"host {hosts[0]}"
    shown = ", ".join(hosts[:4]) + (f" and {len(hosts) - 4} more" if len(hosts) > 4 else "")
    return f"{len(hosts)} hosts ({shown})"


def preflight(jobs: Sequence[Job], source: str) -> None:
    """Local checks before any host is touched (missing driver file, token file, ...).
    Raises InputError naming the inventory file, hosts, step, field and fix, one line per
    distinct problem however many hosts share it; nothing has been changed."""
    hosts_by_problem: dict[tuple[str, str, str | None], list[str]] = {}
    for job in jobs:
        for problem in _host_problems(job):
            hosts = hosts_by_problem.setdefault(problem, [])
            if job.target.name not in hosts:
                hosts.append(job.target.name)
    if hosts_by_problem:
        raise InputError([Problem(source, field_path, f"{_hosts_phrase(hosts)}, {message}",
                                  fix=fix)
                          for (field_path, message, fix), hosts in hosts_by_problem.items()])


def secrets_of(jobs: Sequence[Job]) -> list[str]:
    """Sudo passwords and licence token contents: masked wherever they might appear."""
    secrets = []
    for job in jobs:
        password = job.target.sudo.read_password(job.target.name)
        if password:
            secrets.append(password)
        token = job.requirements.licence_token_file
        if token is not None and token.is_file():
            text = token.read_text(errors="replace").strip()
            if len(text) >= MIN_SECRET_LENGTH:
                secrets.append(text)
    return secrets


def mesh_spec(jobs: Sequence[Job], scenario: str, state_dir: Path) -> MeshSpec:
    private, public = scenario_key(state_dir, scenario)
    peers = tuple(
        MeshPeer(job.target.name, job.target.address, job.target.port, job.target.user,
                 tuple(lookup_key_lines(job.target.known_hosts_file, job.target.address,
                                        job.target.port)))
        for job in jobs
    )
    return MeshSpec(scenario=scenario, private_key=private, public_key=public, peers=peers)


LOCAL_ADDRESSES = ("local", "localhost")


def ssh_factory(options: ConnectOptions) -> TransportFactory:
    """SSH for every host, except bare-metal hosts whose address is 'local'."""
    def make(target: HostTarget, log: HostLog) -> Transport:
        if target.address in LOCAL_ADDRESSES:
            return LocalTransport(target.name, target.sudo, log)
        transport = SSHTransport(target, options, log)
        transport.connect()
        return transport
    return make


def provision_all(
    jobs: Sequence[Job],
    *,
    options: ConnectOptions,
    log_dir: Path,
    state_dir: Path,
    scenario: str = "adhoc",
    dry_run: bool = False,
    concurrency: int = 8,
    redactor: Redactor | None = None,
    on_event: EventSink | None = None,
    transport_factory: TransportFactory | None = None,
    mesh_members: Sequence[Job] | None = None,
    source: str = "inventory",
) -> RunReport:
    """Provision ``jobs`` in parallel. ``mesh_members``: every VM of the scenario, when only
    some are provisioned now, so password-less SSH still lists all peers."""
    started = time.monotonic()
    preflight(jobs, source)
    redactor = redactor or Redactor()
    for secret in secrets_of(jobs):
        redactor.add(secret)
    events: EventSink = on_event or (lambda *_: None)
    factory = transport_factory or ssh_factory(options)
    workers = max(1, min(concurrency, len(jobs)))

    def connect(job: Job) -> Transport | HostReport:
        return _connect(job, factory, log_dir, redactor, events, dry_run)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vgpu-connect") as pool:
        connected = list(pool.map(connect, jobs))

    if any(stepnames.PASSWORDLESS_SSH in job.requirements.steps for job in jobs):
        mesh = mesh_spec(mesh_members or jobs, scenario, state_dir)
        jobs = [dataclasses.replace(job, requirements=dataclasses.replace(
            job.requirements, mesh=mesh)) for job in jobs]

    def run(pair: tuple[Job, Transport | HostReport]) -> HostReport:
        return _provision_connected(pair[0], pair[1], events, dry_run)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vgpu-provision") as pool:
        reports = list(pool.map(run, zip(jobs, connected, strict=True)))
    return RunReport(reports, time.monotonic() - started, dry_run)


def _connect(job: Job, factory: TransportFactory, log_dir: Path, redactor: Redactor,
             events: EventSink, dry_run: bool) -> Transport | HostReport:
    """The host's transport, or its report with the failed connect step."""
    log = HostLog(log_dir / f"{job.target.name}.log", redactor)
    log.line(f"=== vgpu provision {'(dry run) ' if dry_run else ''}{job.target.name} "
             f"{job.target.user}@{job.target.address}:{job.target.port}")
    events(job.target.name, "connect", None, "connecting")
    try:
        return factory(job.target, log)
    except ProvisionError as exc:
        log.line(f"[connect] failed: {exc}")
        events(job.target.name, "connect", Outcome.FAILED, redactor.redact(exc.message))
        report = HostReport(job.target.name, job.target.address, log.path)
        report.steps.append(StepReport("connect", Outcome.FAILED,
                                       redactor.redact(exc.message), fix=exc.fix))
        return report


def _provision_connected(job: Job, transport: Transport | HostReport, events: EventSink,
                         dry_run: bool) -> HostReport:
    if isinstance(transport, HostReport):
        return transport
    ctx = HostContext(job.target, transport, job.requirements, dry_run=dry_run)
    try:
        return provision_host(ctx, build_steps(job.requirements), job.target.address, events)
    finally:
        transport.close()
