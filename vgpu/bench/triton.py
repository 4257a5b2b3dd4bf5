"""Triton servers deployed for one workload: on every host of the targets, one container
of the configured tritonserver image serving a model repository that the harness writes
there (``python -m loadgen triton-repo``), waited for on /v2/health/ready under a
deadline, and removed when the workload ends, failed or was interrupted."""

from __future__ import annotations

import contextlib
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vgpu.bench.workload import EffectiveWorkload
from vgpu.container import docker
from vgpu.container import triton as server
from vgpu.container.docker import DockerCli
from vgpu.container.spec import ContainerSpec, in_container
from vgpu.container.triton import DEFAULT_TRITON_IMAGE, TritonPorts, TritonServerSpec
from vgpu.errors import RemoteError
from vgpu.remote.transport import Transport
from vgpu.targets.hostprobe import transport_home
from vgpu.targets.target import Target

ONNXRUNTIME = "onnxruntime"
PYTHON = "python"
DEFAULT_DEVICE = {PYTHON: "cpu", ONNXRUNTIME: "gpu"}  # the instance group triton-repo picks
POLL_S = 0.5
REPO_TIMEOUT_S = 900.0  # building a full-size model on first use takes a while

Phase = Callable[[str], None]


@dataclass(frozen=True)
class TritonSetup:
    """How servers are deployed: the image, the docker CLI of the hosts, the deadlines.
    ``ports`` None: three ports free on each host at the time (no clash with whatever
    else listens there, a server left behind included)."""

    image: str = DEFAULT_TRITON_IMAGE
    cli: DockerCli = field(default_factory=DockerCli)
    ready_s: float = 300.0
    pull_s: float = 3600.0
    start_s: float = 120.0
    ports: TritonPorts | None = None


@dataclass
class HostServer:
    """The server of one host and the targets it serves."""

    host: str
    transport: Transport
    targets: list[Target]
    folder: str = ""  # absolute, on the host; holds repo/
    spec: TritonServerSpec | None = None
    kind: str = ONNXRUNTIME
    device: str = "cpu"
    ready_s: float | None = None

    @property
    def python(self) -> str:
        """The interpreter that probes the host (this one here, the guest's python3)."""
        return shlex.quote(sys.executable) if self.targets[0].is_local else "python3"

    def describe(self) -> dict[str, Any]:
        assert self.spec is not None
        return {"container": self.spec.name, "url": self.spec.grpc_url,
                "model_backend": self.kind, "instance_group": f"KIND_{self.device.upper()}",
                "gpus": list(self.spec.devices), "ready_s": self.ready_s}


class NotReady(RemoteError):
    """The server did not become ready: it exited, vanished or ran past its deadline."""


def wait_ready(poll: Callable[[], str], limit_s: float,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> float:
    """Polls until ``poll`` says ``ready`` (returns the seconds it took). A state other
    than a starting container's fails at once; the deadline bounds the wait."""
    started = clock()
    while True:
        state = poll()
        if state == server.READY:
            return clock() - started
        if state not in server.WAITING_STATES:
            raise NotReady(f"the server container is {state or 'in no known state'}")
        if clock() - started > limit_s:
            raise NotReady(f"not ready after {limit_s:.0f} s")
        sleep(POLL_S)


def server_hosts(targets: Sequence[Target]) -> list[HostServer]:
    """The targets grouped by the host they run on (one transport per host)."""
    hosts: dict[int, HostServer] = {}
    for target in targets:
        key = id(target.transport)
        if key not in hosts:
            hosts[key] = HostServer(target.transport.name, target.transport, [])
        hosts[key].targets.append(target)
    return list(hosts.values())


def gpu_devices(targets: Sequence[Target]) -> tuple[str, ...]:
    """The GPUs and MIG devices the host's instances use (none for CPU instances)."""
    found: list[str] = []
    for target in targets:
        if target.container is not None:
            found += target.container.devices
        elif target.device.get("kind") in ("gpu", "mig"):
            found.append(str(target.device.get("uuid") or target.device.get("index", 0)))
    return tuple(dict.fromkeys(found))


def repository_args(workload: EffectiveWorkload, kind: str, device: str,
                    threads: int | None) -> list[str]:
    """``loadgen triton-repo`` arguments without ``--out``: the workload's model, its
    batch as the server's max batch size (dynamic batching up to it). ``--device`` only
    where it differs from the kind's default, so older harnesses understand the rest."""
    args = ["triton-repo", "--model", workload.model, "--precision", workload.precision,
            "--kind", kind, "--max-batch-size", str(workload.batch)]
    if device != DEFAULT_DEVICE[kind]:
        args += ["--device", device]
    if workload.variant:
        args += ["--variant", workload.variant]
    if threads:
        args += ["--threads", str(threads)]
    return args


def _run(host: HostServer, command: str, timeout: float, what: str) -> str:
    done = host.transport.run(command, timeout=timeout)
    if not done.ok:
        raise RemoteError(f"{host.host}: {what} failed: {done.tail()}")
    return done.stdout


def _folder(host: HostServer, session: str) -> str:
    target = host.targets[0]
    root = str(target.local_root.resolve()) if target.local_root else target.work_root
    if not root.startswith("/"):
        root = f"{transport_home(host.transport)}/{root}"
    return f"{root.rstrip('/')}/triton-{session}"


def _backend_kind(host: HostServer, setup: TritonSetup) -> str:
    listing = host.transport.run(shlex.join(server.backends_argv(setup.image, setup.cli)),
                                 timeout=300)
    found = docker.output_lines(listing.stdout) if listing.ok else []
    if ONNXRUNTIME in found:
        return ONNXRUNTIME
    if PYTHON in found:
        return PYTHON
    raise RemoteError(f"{host.host}: {setup.image} has neither the onnxruntime nor the "
                      f"python backend in {server.BACKENDS_DIR} (found: "
                      f"{', '.join(found) or listing.tail() or 'nothing'}): give a "
                      "tritonserver image (--triton-image, guest.triton_image)")


def _repository_command(host: HostServer, args: list[str]) -> str:
    target = host.targets[0]
    launch = target.container
    if launch is None:
        return f"{target.harness} {shlex.join(args)} --out {shlex.quote(host.folder + '/repo')}"
    spec = ContainerSpec(
        image=launch.image, run_id=f"{launch.session}-triton", instance=host.host,
        work_dir=Path(host.folder), command=(*args, "--out", in_container("repo")),
        interactive=False, memlock_unlimited=launch.memlock_unlimited, user=launch.user,
        cache_dir=Path(launch.cache_dir) if launch.cache_dir else None)
    return shlex.join(docker.run_argv(spec, launch.cli))


def _threads(targets: Sequence[Target]) -> int | None:
    threads = [t.threads for t in targets]
    return sum(t for t in threads if t) if all(threads) else None


def prepare(host: HostServer, workload: EffectiveWorkload, setup: TritonSetup,
            session: str) -> TritonServerSpec:
    """Pulls the image if missing, picks the model backend it has and writes the model
    repository on the host; returns the server's spec (nothing started yet)."""
    _run(host, server.pull_command(setup.image, setup.cli), setup.pull_s,
         f"pulling {setup.image}")
    host.kind = _backend_kind(host, setup)
    devices = gpu_devices(host.targets)
    host.device = "gpu" if devices and host.kind == ONNXRUNTIME else "cpu"
    host.folder = _folder(host, session)
    _run(host, f"mkdir -p {shlex.quote(host.folder)}", 60, "making the repository folder")
    args = repository_args(workload, host.kind, host.device,
                           _threads(host.targets) if host.kind == PYTHON else None)
    _run(host, _repository_command(host, args), REPO_TIMEOUT_S,
         "writing the Triton model repository")
    ports = setup.ports or server.parse_ports(
        _run(host, server.free_ports_command(host.python), 60, "finding free ports"))
    return TritonServerSpec(image=setup.image, session=session, host=host.host,
                            repository=f"{host.folder}/repo", ports=ports,
                            devices=devices if host.device == "gpu" else ())


def start(host: HostServer, setup: TritonSetup) -> None:
    assert host.spec is not None
    _run(host, shlex.join(server.run_argv(host.spec, setup.cli)), setup.start_s,
         f"starting the Triton server {host.spec.name}")


def await_ready(host: HostServer, setup: TritonSetup) -> None:
    spec = host.spec
    assert spec is not None
    command = server.ready_command(spec, host.python, setup.cli)

    def poll() -> str:
        lines = host.transport.run(command, timeout=60).stdout.split()
        return lines[-1] if lines else ""

    try:
        host.ready_s = wait_ready(poll, setup.ready_s)
    except NotReady as exc:
        log = host.transport.run(server.logs_command(spec.name, setup.cli, 15), timeout=60)
        raise NotReady(f"{host.host}: Triton server {spec.name} ({spec.image}): {exc}; "
                       f"its log ends:\n{log.stdout.strip()}") from None


def stop(host: HostServer, setup: TritonSetup, log_dir: Path) -> None:
    """Keeps the server's log, removes the container and the repository; a host that is
    gone runs nothing of ours any more either."""
    if host.spec is not None:
        with contextlib.suppress(RemoteError):
            log = host.transport.run(server.logs_command(host.spec.name, setup.cli),
                                     timeout=60)
            log_dir.mkdir(parents=True, exist_ok=True)
            (log_dir / f"triton-{host.host}.log").write_text(log.stdout)
        with contextlib.suppress(RemoteError):
            host.transport.run(server.remove_command(host.spec.name, setup.cli), timeout=120)
    if host.folder:
        with contextlib.suppress(RemoteError):
            host.transport.run(f"rm -rf {shlex.quote(host.folder)} 2>/dev/null || true",
                               timeout=120)


@contextmanager
def deployed(targets: Sequence[Target], workload: EffectiveWorkload, setup: TritonSetup,
             session: str, log_dir: Path, phase: Phase) -> Iterator[list[HostServer]]:
    """One ready server per host for the block; stopped afterwards, whatever happens."""
    hosts = server_hosts(targets)
    try:
        for host in hosts:
            phase(f"{workload.label}: Triton server on {host.host} ({setup.image})")
            host.spec = prepare(host, workload, setup, session)
            start(host, setup)
        for host in hosts:
            phase(f"{workload.label}: waiting for Triton on {host.host} to be ready")
            await_ready(host, setup)
        yield hosts
    finally:
        for host in hosts:
            stop(host, setup, log_dir)
